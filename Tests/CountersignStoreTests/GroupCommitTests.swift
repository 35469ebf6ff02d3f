import CountersignCore
import CountersignStore
import Foundation
import Logging
import Testing

/// SQLite's creates and transitions share transactions when they arrive together.
@Suite struct GroupCommitTests {
    let folder: URL

    init() throws {
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("countersign-group-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    }

    func pending(_ id: String, user: User, newPasswordHash: String? = "new-hash") -> ApprovalRequest {
        let now = Date()
        return ApprovalRequest(
            id: id, userID: user.id, subject: "\(user.id)-\(id)", action: .passwordReset, state: .pending,
            createdAt: now, expiresAt: now.addingTimeInterval(60), completionWindow: 120, updatedAt: now,
            numberCode: NumberCode.seal("47"), newPasswordHash: newPasswordHash, requester: RequesterInfo(ip: "127.0.0.1", userAgent: nil))
    }

    /// A write that fails after changing a row takes back its own change only:
    /// the writes beside it commit, and all of them are there after reopening.
    @Test func aFailingWriteTakesBackOnlyItsOwnChangesAndTheOthersAreDurable() async throws {
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appendingPathComponent("group.sqlite").path
        let store = try SQLiteStore(path: path, logger: Logger(label: "test"))
        let user = try await store.createUser(email: "ana@example.com", passwordHash: "old-hash")

        // Approved, but its row holds no new password: completing it updates the row, then throws.
        let broken = pending("broken", user: user, newPasswordHash: nil)
        _ = try await store.insert(broken, idempotency: nil, supersededEvent: { _ in nil })
        var machine = ApprovalStateMachine(broken)
        guard case .persist(let approval) = machine.respond(.approve, numberCode: "47", deviceID: "d1", at: Date()) else {
            Issue.record("approve refused")
            return
        }
        #expect(try await store.apply(approval, to: machine.request, event: nil, audit: nil, writeTime: { approval.at }))
        guard case .persist(let completion) = machine.complete(at: Date()) else {
            Issue.record("complete refused")
            return
        }
        let completed = machine.request

        let outcomes = await withTaskGroup(of: (String, Bool).self) { group in
            group.addTask {
                let failed = (try? await store.apply(completion, to: completed, event: nil, audit: nil, writeTime: { completion.at })) == nil
                return ("broken", failed)
            }
            for index in 0..<60 {
                group.addTask {
                    let request = self.pending("r\(index)", user: user)
                    let inserted = (try? await store.insert(request, idempotency: nil, supersededEvent: { _ in nil })) != nil
                    return (request.id, inserted)
                }
            }
            return await group.reduce(into: [String: Bool]()) { $0[$1.0] = $1.1 }
        }
        #expect(outcomes["broken"] == true, "the completion without a held password failed")
        #expect((0..<60).allSatisfy { outcomes["r\($0)"] == true })
        #expect(try await store.request(id: "broken")?.state == .approved, "its update was taken back")
        #expect(try await store.user(id: user.id)?.passwordHash == "old-hash")

        try store.close()
        let reopened = try SQLiteStore(path: path, logger: Logger(label: "test"))
        for index in 0..<60 {
            #expect(try await reopened.request(id: "r\(index)")?.state == .pending)
        }
        #expect(try await reopened.request(id: "broken")?.state == .approved)
    }
}

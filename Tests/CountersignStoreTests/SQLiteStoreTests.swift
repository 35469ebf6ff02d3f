import CountersignCore
import CountersignStore
import Foundation
import Logging
import Testing

@Suite struct SQLiteStoreTests {
    let folder: URL
    var path: String { folder.appendingPathComponent("store.sqlite").path }

    init() throws {
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("countersign-store-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    }

    func open() throws -> SQLiteStore {
        try SQLiteStore(path: path, logger: Logger(label: "test"))
    }

    func pending(_ id: String, user: User, at t0: Date = Date()) -> ApprovalRequest {
        ApprovalRequest(
            id: id, userID: user.id, subject: user.id, action: .passwordReset, state: .pending,
            createdAt: t0, expiresAt: t0.addingTimeInterval(60), completionWindow: 120, updatedAt: t0,
            numberCode: NumberCode.seal("47"), newPasswordHash: "new-hash", requester: RequesterInfo(ip: "127.0.0.1", userAgent: nil))
    }

    @Test func theDatabaseIsInWALModeWithFullSync() async throws {
        defer { try? FileManager.default.removeItem(at: folder) }
        let store = try open()
        #expect(try store.pragma("journal_mode") == "wal")
        #expect(try store.pragma("synchronous") == "2")
    }

    @Test func onlyOneConditionalUpdateWins() async throws {
        defer { try? FileManager.default.removeItem(at: folder) }
        let store = try open()
        let user = try await store.createUser(email: "ana@example.com", passwordHash: "old-hash")
        let request = pending("r1", user: user)
        #expect(try await store.insert(request).isEmpty)

        let now = Date()
        var approve = ApprovalStateMachine(request)
        guard case .persist(let approval) = approve.respond(.approve, numberCode: "47", deviceID: "d1", at: now) else {
            Issue.record("approve refused")
            return
        }
        var deny = ApprovalStateMachine(request)
        guard case .persist(let denial) = deny.respond(.deny, numberCode: nil, deviceID: "d2", at: now) else {
            Issue.record("deny refused")
            return
        }
        async let first = store.apply(approval, to: approve.request)
        async let second = store.apply(denial, to: deny.request)
        let results = [try await first, try await second]
        #expect(results.filter { $0 }.count == 1)
        let stored = try #require(try await store.request(id: "r1"))
        #expect(stored.state == (results[0] ? .approved : .denied))
    }

    @Test func aTransitionAfterTheDeadlineIsRefusedButTheTimeOutApplies() async throws {
        defer { try? FileManager.default.removeItem(at: folder) }
        let store = try open()
        let user = try await store.createUser(email: "ana@example.com", passwordHash: "old-hash")
        let t0 = Date().addingTimeInterval(-120)
        let request = pending("r1", user: user, at: t0)
        _ = try await store.insert(request)
        // A decision made "before" the deadline by a slow caller, written after it.
        let late = Transition(from: .pending, to: .approved, cause: .approvedByDevice, at: Date())
        #expect(try await store.apply(late, to: request) == false)
        var machine = ApprovalStateMachine(request)
        let due = machine.expireIfDue(at: Date())
        let timeout = try #require(due)
        #expect(try await store.apply(timeout, to: machine.request))
        #expect(try await store.request(id: "r1")?.state == .expired)
    }

    @Test func completingSetsThePasswordInTheSameTransactionOnce() async throws {
        defer { try? FileManager.default.removeItem(at: folder) }
        let store = try open()
        let user = try await store.createUser(email: "ana@example.com", passwordHash: "old-hash")
        let request = pending("r1", user: user)
        _ = try await store.insert(request)
        var machine = ApprovalStateMachine(request)
        guard case .persist(let approval) = machine.respond(.approve, numberCode: "47", deviceID: "d1", at: Date()) else {
            Issue.record("approve refused")
            return
        }
        #expect(try await store.apply(approval, to: machine.request))
        guard case .persist(let completion) = machine.complete(at: Date()) else {
            Issue.record("complete refused")
            return
        }
        #expect(try await store.apply(completion, to: machine.request))
        #expect(try await store.user(id: user.id)?.passwordHash == "new-hash")
        #expect(try await store.request(id: "r1")?.newPasswordHash == nil)
        // A second completion changes nothing.
        try await store.setPassword(userID: user.id, passwordHash: "changed-later")
        #expect(try await store.apply(completion, to: machine.request) == false)
        #expect(try await store.user(id: user.id)?.passwordHash == "changed-later")
    }

    @Test func insertingSupersedesThePendingRequestOfTheSameSubject() async throws {
        defer { try? FileManager.default.removeItem(at: folder) }
        let store = try open()
        let ana = try await store.createUser(email: "ana@example.com", passwordHash: "h")
        let bob = try await store.createUser(email: "bob@example.com", passwordHash: "h")
        _ = try await store.insert(pending("a1", user: ana))
        _ = try await store.insert(pending("b1", user: bob))
        let superseded = try await store.insert(pending("a2", user: ana))
        #expect(superseded.map(\.id) == ["a1"])
        #expect(superseded.first?.state == .pending)
        #expect(try await store.request(id: "a1")?.state == .cancelled)
        #expect(try await store.request(id: "a1")?.version == 1)
        #expect(try await store.request(id: "a1")?.newPasswordHash == nil)
        #expect(try await store.request(id: "b1")?.state == .pending)
        #expect(Set(try await store.liveRequests().map(\.id)) == ["a2", "b1"])
    }

    @Test func everythingSurvivesReopening() async throws {
        defer { try? FileManager.default.removeItem(at: folder) }
        let user: User
        do {
            let store = try open()
            user = try await store.createUser(email: "Ana@Example.com", passwordHash: "h")
            _ = try await store.registerDevice(userID: user.id, name: "Phone", platform: "iOS", fcmToken: "tok", apiKeyHash: "kh", publicKey: nil)
            _ = try await store.insert(pending("r1", user: user))
            try store.close()
        }
        let reopened = try open()
        #expect(try await reopened.user(email: "ana@example.com")?.id == user.id)
        #expect(try await reopened.device(apiKeyHash: "kh")?.fcmToken == "tok")
        let request = try #require(try await reopened.request(id: "r1"))
        #expect(request.state == .pending)
        #expect(NumberCode.matches("47", try #require(request.numberCode)))
    }

    @Test func aPushTokenBelongsToOneAccountAtATime() async throws {
        defer { try? FileManager.default.removeItem(at: folder) }
        let store = try open()
        let ana = try await store.createUser(email: "ana@example.com", passwordHash: "h")
        let bob = try await store.createUser(email: "bob@example.com", passwordHash: "h")
        _ = try await store.registerDevice(userID: ana.id, name: "Phone", platform: "iOS", fcmToken: "shared", apiKeyHash: "k1", publicKey: nil)
        // Bob presents Ana's token: Ana keeps it (her prompts go on), Bob's device is pull only.
        let bobs = try await store.registerDevice(
            userID: bob.id, name: "Phone", platform: "iOS", fcmToken: "shared", apiKeyHash: "k2", publicKey: nil)
        #expect(bobs.fcmToken == nil)
        #expect(bobs.pushEnabled == false)
        let anas = try await store.devices(userID: ana.id)
        #expect(anas.first?.fcmToken == "shared")
        #expect(anas.first?.pushEnabled == true)
        #expect(try await store.devices(userID: bob.id).first?.fcmToken == nil)
        // The same through a token update.
        try await store.updatePushToken(deviceID: bobs.id, fcmToken: "shared")
        #expect(try await store.devices(userID: ana.id).first?.fcmToken == "shared")
        #expect(try await store.devices(userID: bob.id).first?.pushEnabled == false)
        // Once Ana's phone moves to a new token, the old one is free for Bob.
        try await store.updatePushToken(deviceID: try #require(anas.first?.id), fcmToken: "ana-new")
        try await store.updatePushToken(deviceID: bobs.id, fcmToken: "shared")
        #expect(try await store.devices(userID: bob.id).first?.fcmToken == "shared")
    }

    @Test func aDuplicateEmailIsRefused() async throws {
        defer { try? FileManager.default.removeItem(at: folder) }
        let store = try open()
        _ = try await store.createUser(email: "ana@example.com", passwordHash: "h")
        await #expect(throws: AccountError.emailTaken) {
            _ = try await store.createUser(email: " ANA@example.com", passwordHash: "h")
        }
    }
}

extension SQLiteStore {
    /// Applies a transition written at the moment it was decided.
    func apply(_ transition: Transition, to request: ApprovalRequest) async throws -> Bool {
        try await apply(transition, to: request, event: nil, writeTime: { transition.at })
    }

    /// Inserts a phone-reset request (no idempotency key, no webhook).
    func insert(_ request: ApprovalRequest) async throws -> [ApprovalRequest] {
        try await insert(request, idempotency: nil, supersededEvent: { _ in nil })
    }
}

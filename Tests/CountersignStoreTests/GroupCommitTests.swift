import CountersignCore
import Foundation
import GRDB
import Logging
import TestSupport
import Testing

@testable import CountersignStore

/// SQLite's creates and transitions share transactions when they arrive together.
@Suite struct GroupCommitTests {
    let folder: URL

    init() throws {
        folder = try makeTemporaryFolder("countersign-group")
    }

    func pending(_ id: String, user: User, newPasswordHash: String? = "new-hash") -> ApprovalRequest {
        let now = Date()
        return ApprovalRequest(
            id: id, userID: user.id, subject: "\(user.id)-\(id)", action: .passwordReset, state: .pending,
            createdAt: now, expiresAt: now.addingTimeInterval(60), completionWindow: 120, updatedAt: now,
            numberCode: NumberCode.seal("47"), newPasswordHash: newPasswordHash, requester: RequesterInfo(ip: "127.0.0.1", userAgent: nil))
    }

    /// A batch keeps its temporary data (its savepoints' sub-journals) in memory, batch after
    /// batch, and the writer is back on SQLite's default after each.
    @Test func everyBatchKeepsItsTemporaryDataInMemory() async throws {
        defer { try? FileManager.default.removeItem(at: folder) }
        let store = try SQLiteStore(path: folder.appendingPathComponent("temp.sqlite").path, logger: Logger(label: "test"))
        for _ in 0..<3 {
            #expect(try await store.group.write { db in try Int.fetchOne(db, sql: "PRAGMA temp_store") } == 2)
            #expect(try store.pragma("temp_store") == "0")
        }
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

    /// trust.md: when a failed write's changes cannot be taken back (its
    /// `ROLLBACK TO` fails), the whole batch fails: nothing of it is durable.
    @Test func aFailedRollbackToFailsTheWholeBatch() async throws {
        defer { try? FileManager.default.removeItem(at: folder) }
        struct WriteFailed: Error {}
        struct RollbackRefused: Error {}
        let pool = try DatabasePool(path: folder.appendingPathComponent("rollback.sqlite").path)
        try await pool.write { db in try db.execute(sql: "CREATE TABLE t (v TEXT)") }
        let group = GroupCommit(pool: pool, rollback: { _ in throw RollbackRefused() })

        // act: a write that changes a row, then throws; taking it back fails.
        await #expect(throws: GroupCommit.RollbackFailed.self) {
            try await group.write { db in
                try db.execute(sql: "INSERT INTO t (v) VALUES ('half-done')")
                throw WriteFailed()
            }
        }

        // check: its change did not commit with the batch.
        #expect(try await pool.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM t") } == 0)
        // With a rollback that works, the same failure takes back its own change only.
        let working = GroupCommit(pool: pool)
        await #expect(throws: WriteFailed.self) {
            try await working.write { db in
                try db.execute(sql: "INSERT INTO t (v) VALUES ('half-done')")
                throw WriteFailed()
            }
        }
        try await working.write { db in try db.execute(sql: "INSERT INTO t (v) VALUES ('whole')") }
        #expect(try await pool.read { db in try String.fetchAll(db, sql: "SELECT v FROM t") } == ["whole"])
    }
}

/// The `v7-trust` migration, on a database made by the version before it.
@Suite struct TrustMigrationTests {
    @Test func anUpgradeGivesIntegrationsTheirUsersAndTakesTheResetRightFromTheirDevices() async throws {
        let folder = try makeTemporaryFolder("countersign-v7")
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appendingPathComponent("old.sqlite").path
        // setup: as v6 left it — an integration's user with an enrolled device, a second enrolled
        // device that logged in with the password since, and a password user's own phone.
        let queue = try DatabaseQueue(path: path)
        try SQLiteStore.migrator.migrate(queue, upTo: "v6-integrations")
        try await queue.write { db in
            try db.execute(
                sql: """
                    INSERT INTO integrations (id, name, api_key_hash, enabled, created_at, webhook_url, webhook_secret)
                        VALUES ('int_1', 'Acme', 'kh', 1, 0, 'https://hooks.example.com/', 'whsec_-_8AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA');
                    INSERT INTO users (id, email, password_hash, created_at) VALUES ('u_bob', 'bob@example.com', '', 0);
                    INSERT INTO users (id, email, password_hash, created_at) VALUES ('u_ana', 'ana@example.com', '$2b$04$x', 0);
                    INSERT INTO devices (id, user_id, name, platform, push_enabled, api_key_hash, created_at)
                        VALUES ('d_enrolled', 'u_ana', 'tablet', 'ios', 0, 'k1', 0),
                               ('d_since', 'u_ana', 'phone 2', 'ios', 0, 'k2', 0),
                               ('d_own', 'u_ana', 'phone', 'ios', 0, 'k3', 0);
                    INSERT INTO audit_events (at, kind, user_id, detail) VALUES (1, 'user_created', 'u_bob', 'integration Acme');
                    INSERT INTO audit_events (at, kind, user_id, device_id, detail) VALUES (2, 'device_enrolled', 'u_ana', 'd_enrolled', 'integration Acme');
                    INSERT INTO audit_events (at, kind, user_id, device_id, detail) VALUES (3, 'device_enrolled', 'u_ana', 'd_since', 'integration Acme');
                    INSERT INTO audit_events (at, kind, user_id, device_id) VALUES (4, 'login_ok', 'u_ana', 'd_since');
                    INSERT INTO audit_events (at, kind, user_id, device_id) VALUES (5, 'login_ok', 'u_ana', 'd_own');
                    """)
        }
        try queue.close()

        // act: the new version opens it.
        let store = try SQLiteStore(path: path, logger: Logger(label: "test"))
        defer { try? store.close() }

        // check
        #expect(try await store.user(email: "bob@example.com", reachableBy: "int_1")?.id == "u_bob")
        #expect(try await store.user(email: "ana@example.com", reachableBy: "int_1") == nil)
        #expect(try await store.device(id: "d_enrolled")?.mayApproveResets == false)
        #expect(try await store.device(id: "d_since")?.mayApproveResets == true)
        #expect(try await store.device(id: "d_own")?.mayApproveResets == true)
        // v8: the base64url secret is now the same bytes in base64, as Standard Webhooks read it.
        #expect(try await store.integration(id: "int_1")?.webhookSecret == "whsec_+/8AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=")
    }
}

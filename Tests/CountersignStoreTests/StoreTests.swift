import CountersignCore
import CountersignPostgres
import CountersignStore
import Foundation
import Logging
import PostgresTestSupport
import TestSupport
import Testing

/// The store test suite, the same tests on SQLite and on PostgreSQL. Where
/// two stores are opened on one database they stand for two nodes.
/// A class, so that each test's folder goes with its instance, whichever backend it ran on.
@Suite final class StoreTests: Sendable {
    let folder: URL

    init() throws {
        folder = try makeTemporaryFolder("countersign-store")
    }

    deinit {
        try? FileManager.default.removeItem(at: folder)
    }

    /// A new, empty database of `backend`: a file path or a URL.
    func newDatabase(_ backend: Backend) async throws -> String {
        try await backend.newDatabase(in: folder)
    }

    func open(_ backend: Backend, _ database: String, node: String = "node-a") async throws -> any CountersignStorage {
        try await backend.open(database, node: node)
    }

    /// A store on a new database of `backend`.
    func open(_ backend: Backend) async throws -> any CountersignStorage {
        try await open(backend, try await newDatabase(backend))
    }

    func pending(_ id: String, user: User, at t0: Date = Date()) -> ApprovalRequest {
        ApprovalRequest(
            id: id, userID: user.id, subject: user.id, action: .passwordReset, state: .pending,
            createdAt: t0, expiresAt: t0.addingTimeInterval(60), completionWindow: 120, updatedAt: t0,
            numberCode: NumberCode.seal("47"), newPasswordHash: "new-hash", requester: RequesterInfo(ip: "127.0.0.1", userAgent: nil))
    }

    @Test func theSQLiteDatabaseIsInWALModeWithFullSync() async throws {
        let store = try SQLiteStore(path: try await newDatabase(.sqlite), logger: Logger(label: "test"))
        #expect(try store.pragma("journal_mode") == "wal")
        // On the writer, where commits happen (GRDB's pool turns its writer to NORMAL with WAL).
        #expect(try store.pragma("synchronous") == "2")
        #expect(try store.pragma("wal_autocheckpoint") == "10000")
        #expect(try store.readerPragma("synchronous") == "2")
        // Temporary data stays SQLite's default outside a group commit's batch: after one that
        // committed and after a job that failed (the same request again) as well.
        let user = try await store.createUser(email: "ana@example.com", passwordHash: "hash")
        #expect(try await store.insert(pending("r1", user: user)).isEmpty)
        await #expect(throws: (any Error).self) { try await store.insert(pending("r1", user: user)) }
        #expect(try store.pragma("temp_store") == "0")
        // Settings only: a pragma that acts is not run.
        #expect(try store.pragma("wal_checkpoint") == nil)
    }

    @Test func aBacklogOfAuditEventsIsWrittenWholeAndInOrderInSeveralGroupCommitJobs() async throws {
        let store = try SQLiteStore(path: try await newDatabase(.sqlite), logger: Logger(label: "test"))
        let at = Date(timeIntervalSince1970: 1_800_000_000)
        let count = SQLiteStore.auditEventsPerWrite * 2 + 7
        let events = (0..<count).map { index in
            AuditEvent(at: at, kind: .pushed, userID: "user-\(index % 5)", requestRef: "ref-\(index)", detail: "event \(index)")
        }
        try await store.append(events)
        #expect(try await store.auditEvents(since: nil, email: nil, kind: nil, limit: count + 10) == events)
    }

    @Test(arguments: Backend.available) func onlyOneConditionalUpdateWins(backend: Backend) async throws {
        let store = try await open(backend)
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

    @Test(arguments: Backend.available) func aTransitionAfterTheDeadlineIsRefusedButTheTimeOutApplies(backend: Backend) async throws {
        let store = try await open(backend)
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

    @Test(arguments: Backend.available) func completingSetsThePasswordInTheSameTransactionOnce(backend: Backend) async throws {
        let store = try await open(backend)
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

    @Test(arguments: Backend.available) func insertingSupersedesThePendingRequestOfTheSameSubject(backend: Backend) async throws {
        let store = try await open(backend)
        let ana = try await store.createUser(email: "ana@example.com", passwordHash: "h")
        let bob = try await store.createUser(email: "bob@example.com", passwordHash: "h")
        _ = try await store.insert(pending("a1", user: ana))
        _ = try await store.insert(pending("b1", user: bob))
        let superseded = try await store.insert(pending("a2", user: ana))
        #expect(superseded.map(\.request.id) == ["a1"])
        // As the insert left it: cancelled, superseded by the newer request, and so stored.
        #expect(superseded.first?.request.state == .cancelled)
        #expect(superseded.first?.transition.from == .pending && superseded.first?.transition.cause == .supersededByNewerRequest)
        #expect(try await store.request(id: "a1")?.state == .cancelled)
        #expect(try await store.request(id: "a1")?.version == 1)
        #expect(try await store.request(id: "a1")?.newPasswordHash == nil)
        #expect(try await store.request(id: "b1")?.state == .pending)
        #expect(Set(try await store.liveRequests().map(\.id)) == ["a2", "b1"])
    }

    @Test(arguments: Backend.available) func everythingSurvivesReopening(backend: Backend) async throws {
        let database = try await newDatabase(backend)
        let user: User
        do {
            let store = try await open(backend, database)
            user = try await store.createUser(email: "Ana@Example.com", passwordHash: "h")
            _ = try await store.registerDevice(userID: user.id, name: "Phone", platform: "iOS", push: .fcm("tok"), apiKeyHash: "kh", publicKey: nil)
            _ = try await store.insert(pending("r1", user: user))
            try store.close()
        }
        let reopened = try await open(backend, database)
        #expect(try await reopened.user(email: "ana@example.com")?.id == user.id)
        #expect(try await reopened.device(apiKeyHash: "kh")?.push?.token == "tok")
        let request = try #require(try await reopened.request(id: "r1"))
        #expect(request.state == .pending)
        #expect(NumberCode.matches("47", try #require(request.numberCode)))
    }

    @Test(arguments: Backend.available) func aPushTokenBelongsToOneAccountAtATime(backend: Backend) async throws {
        let store = try await open(backend)
        let ana = try await store.createUser(email: "ana@example.com", passwordHash: "h")
        let bob = try await store.createUser(email: "bob@example.com", passwordHash: "h")
        _ = try await store.registerDevice(userID: ana.id, name: "Phone", platform: "iOS", push: .fcm("shared"), apiKeyHash: "k1", publicKey: nil)
        // Bob presents Ana's token: Ana keeps it (her prompts go on), Bob's device is pull only.
        let bobs = try await store.registerDevice(
            userID: bob.id, name: "Phone", platform: "iOS", push: .fcm("shared"), apiKeyHash: "k2", publicKey: nil)
        #expect(bobs.push == nil)
        #expect(bobs.pushEnabled == false)
        let anas = try await store.devices(userID: ana.id)
        #expect(anas.first?.push?.token == "shared")
        #expect(anas.first?.pushEnabled == true)
        #expect(try await store.devices(userID: bob.id).first?.push == nil)
        // The same through a token update.
        try await store.updatePushAddress(deviceID: bobs.id, push: .fcm("shared"))
        #expect(try await store.devices(userID: ana.id).first?.push?.token == "shared")
        #expect(try await store.devices(userID: bob.id).first?.pushEnabled == false)
        // Once Ana's phone moves to a new token, the old one is free for Bob.
        try await store.updatePushAddress(deviceID: try #require(anas.first?.id), push: .fcm("ana-new"))
        try await store.updatePushAddress(deviceID: bobs.id, push: .fcm("shared"))
        #expect(try await store.devices(userID: bob.id).first?.push?.token == "shared")
    }

    @Test(arguments: Backend.available) func aDuplicateEmailIsRefused(backend: Backend) async throws {
        let store = try await open(backend)
        _ = try await store.createUser(email: "ana@example.com", passwordHash: "h")
        await #expect(throws: AccountError.emailTaken) {
            _ = try await store.createUser(email: " ANA@example.com", passwordHash: "h")
        }
    }
}

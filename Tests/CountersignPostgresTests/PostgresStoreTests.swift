import CountersignCore
import Foundation
import Logging
import PostgresNIO
import PostgresTestSupport
import Synchronization
import Testing

@testable import CountersignPostgres

/// The PostgreSQL store's own behaviour as a cluster's nodes use it: migrations run once, shared rate
/// counters, notifications between nodes, a lost or frozen server, query limits. Two stores opened on
/// one database stand for two nodes. (The store suite both backends pass is in CountersignStoreTests.)
@Suite struct PostgresStoreTests {
    /// A new, empty database on the test server (`backend` is always `.postgres` here).
    func newDatabase(_ backend: Backend) async throws -> String {
        try await backend.newDatabase(in: FileManager.default.temporaryDirectory)
    }

    /// The URL's `connect_timeout` bounds the pool's connections and the notification connection alike.
    @Test func theURLsConnectTimeoutReachesEveryConnection() throws {
        let patient = try PostgresConfiguration(url: "postgres://countersign@db.internal/auth?connect_timeout=20")
        #expect(patient.clientConfiguration(maximumConnections: 2).options.connectTimeout == .seconds(20))
        #expect(try patient.connectionConfiguration().options.connectTimeout == .seconds(20))
        #expect(patient.redacted.hasSuffix("&connect_timeout=20"))
        let plain = try PostgresConfiguration(url: "postgres://countersign@db.internal/auth")
        #expect(plain.clientConfiguration(maximumConnections: 2).options.connectTimeout == .seconds(5))
        #expect(!plain.redacted.contains("connect_timeout"))
    }

    func pending(_ id: String, user: User, at t0: Date = Date()) -> ApprovalRequest {
        ApprovalRequest(
            id: id, userID: user.id, subject: user.id, action: .passwordReset, state: .pending,
            createdAt: t0, expiresAt: t0.addingTimeInterval(60), completionWindow: 120, updatedAt: t0,
            numberCode: NumberCode.seal("47"), newPasswordHash: "new-hash", requester: RequesterInfo(ip: "127.0.0.1", userAgent: nil))
    }

    @Test(.enabled(if: PostgresTestServer.isAvailable, Comment(rawValue: PostgresTestServer.skipNote)))
    func nodesStartingTogetherMigrateOnceAndShareTheirRateCounters() async throws {
        let database = try await newDatabase(.postgres)
        let settings = try PostgresConfiguration(url: database)
        let nodes = try await withThrowingTaskGroup(of: PostgresStore.self) { group in
            for index in 0..<4 {
                group.addTask { try await PostgresStore(configuration: settings, nodeID: "n\(index)", logger: Logger(label: "test")) }
            }
            return try await group.reduce(into: [PostgresStore]()) { $0.append($1) }
        }
        let server = try await PostgresTestServer.shared()
        let name = PostgresTestServer.databaseName(of: database)
        #expect(try await server.psql("SELECT count(*) FROM schema_migrations", database: name) == "\(PostgresStore.migrations.count)")
        // 40 attempts spread over the nodes against a limit of 10: 10 admitted in all.
        let limit = RateLimit(count: 10, window: 60)
        let now = Date()
        let admitted = try await withThrowingTaskGroup(of: WindowCounter.Reservation?.self) { group in
            for index in 0..<40 {
                group.addTask {
                    let (admission, _) = try await nodes[index % 4].reserve(.loginFailuresPerIP, key: "203.0.113.9", limit: limit, now: now)
                    if case .admitted(let reservation) = admission { return reservation }
                    return nil
                }
            }
            return try await group.reduce(into: [WindowCounter.Reservation]()) { if let reservation = $1 { $0.append(reservation) } }
        }
        #expect(admitted.count == 10)
        guard case .refused(let retryAfter) = try await nodes[0].reserve(.loginFailuresPerIP, key: "203.0.113.9", limit: limit, now: now).admission
        else {
            Issue.record("an 11th attempt was admitted")
            return
        }
        #expect((1...60).contains(retryAfter))
        // A refund on one node frees a place for another; the key is stored hashed.
        try await nodes[1].refund(.loginFailuresPerIP, admitted[0])
        if case .refused = try await nodes[2].reserve(.loginFailuresPerIP, key: "203.0.113.9", limit: limit, now: now).admission {
            Issue.record("the refunded place was not free")
        }
        #expect(try await server.psql("SELECT count(*) FROM rate_counters WHERE key LIKE '%203.0.113%'", database: name) == "0")
        // A new window after the old one ends.
        if case .refused = try await nodes[3].reserve(.loginFailuresPerIP, key: "203.0.113.9", limit: limit, now: now.addingTimeInterval(61))
            .admission
        {
            Issue.record("the next window was refused")
        }
    }

    @Test(.enabled(if: PostgresTestServer.isAvailable, Comment(rawValue: PostgresTestServer.skipNote)))
    func aQueryWaitsForAConnectionNoLongerThanItsBoundAndACancelledOneIsNoOutage() async throws {
        let database = try await newDatabase(.postgres)
        let store = try await PostgresStore(
            configuration: try PostgresConfiguration(url: database), nodeID: "a", connectionWait: .seconds(1), logger: Logger(label: "test"))
        defer { try? store.close() }
        #expect(try await store.user(email: "ana@example.com") == nil)
        let server = try await PostgresTestServer.shared()
        let name = PostgresTestServer.databaseName(of: database)
        try await server.psql("ALTER DATABASE \(name) ALLOW_CONNECTIONS false")
        try await server.psql("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = '\(name)'")
        defer { _ = try? server.psqlBlocking("ALTER DATABASE \(name) ALLOW_CONNECTIONS true") }
        // Time for the pool to see its connections closed: PostgresNIO can leave a query
        // written to a connection closing at that very moment waiting for ever.
        try await Task.sleep(for: .seconds(1))
        // Out of reach: the query gives up after its bound (checked four times a second), well before the pool's own 60 s.
        let clock = ContinuousClock()
        let started = clock.now
        await #expect(throws: StoreUnavailable.self) { _ = try await store.user(email: "ana@example.com") }
        // Only a hang detector: it tells the 1 s bound from the pool's own 60 s, with room for a busy machine.
        #expect(clock.now - started < .seconds(45))
        #expect(await store.ping() == false)
        // A caller that gives up while it waits gets its cancellation, not an outage.
        let waiting = Task { try await store.user(email: "ana@example.com") }
        try await Task.sleep(for: .milliseconds(100))
        waiting.cancel()
        await #expect(throws: CancellationError.self) { _ = try await waiting.value }
        // Reachable again: the same store answers.
        try await server.psql("ALTER DATABASE \(name) ALLOW_CONNECTIONS true")
        #expect(try await Self.answersAgain(store))
    }

    /// Whether `store` answers a ping within 60 s (a hang detector), asked four times a second.
    static func answersAgain(_ store: PostgresStore) async throws -> Bool {
        for _ in 0..<240 {
            if await store.ping() { return true }
            try await Task.sleep(for: .milliseconds(250))
        }
        return false
    }

    /// Inserts `request` and approves it, on `store`; the state machine after the approval.
    static func insertAndApprove(_ request: ApprovalRequest, on store: any ApprovalStore) async throws -> ApprovalStateMachine {
        _ = try await store.insert(request)
        var machine = ApprovalStateMachine(request)
        guard case .persist(let approval) = machine.respond(.approve, numberCode: "47", deviceID: "d1", at: Date()) else {
            throw PostgresTestError("the state machine refused the approval")
        }
        #expect(try await store.apply(approval, to: machine.request))
        return machine
    }

    /// A database that stops answering on an open connection (here its server
    /// process is frozen, the socket left open) holds no caller past the query limit.
    @Test(.enabled(if: PostgresTestServer.isAvailable, Comment(rawValue: PostgresTestServer.skipNote)))
    func aQueryOnAConnectionThatStopsAnsweringEndsAtTheQueryLimit() async throws {
        let database = try await newDatabase(.postgres)
        // The limit as `--database-query-limit` sets it.
        var settings = try PostgresConfiguration(url: database)
        settings.queryLimit = .seconds(1)
        let store = try await PostgresStore(configuration: settings, nodeID: "a", maximumConnections: 1, logger: Logger(label: "test"))
        defer { try? store.close() }
        #expect(try await store.user(email: "ana@example.com") == nil)
        // A transaction left idle (its node frozen) is ended by the server, freeing its locks.
        #expect(try await store.value(String.self, "SHOW idle_in_transaction_session_timeout") == "1min")
        let server = try await PostgresTestServer.shared()
        let name = PostgresTestServer.databaseName(of: database)
        let backends = try await server.psql("SELECT pid FROM pg_stat_activity WHERE datname = '\(name)' AND backend_type = 'client backend'")
            .split(separator: "\n").compactMap { pid_t($0) }
        let backend = try #require(backends.count == 1 ? backends.first : nil, "the pool's one connection: \(backends)")
        try #require(kill(backend, SIGSTOP) == 0)
        defer { kill(backend, SIGCONT) }
        // Should the limit not hold, the server wakes after 20 s and the query answers: a failure, not a hung test.
        let wake = Task {
            try await Task.sleep(for: .seconds(20))
            kill(backend, SIGCONT)
        }
        defer { wake.cancel() }
        let clock = ContinuousClock()
        let started = clock.now
        await #expect(throws: StoreUnavailable.self) { _ = try await store.user(email: "ana@example.com") }
        // Without the limit the server's wake-up after 20 s would have answered the query instead.
        // A lower bound, stamped before the call: a busy machine only lengthens it.
        let waited = clock.now - started
        #expect(waited >= .seconds(1), "waited \(waited)")
        kill(backend, SIGCONT)
        // The pool opens a new connection: the same store answers.
        #expect(try await Self.answersAgain(store))
    }

    /// A notification connection that falls silent (its server process frozen,
    /// the socket left open) is given up like a cut one: no wake-up is lost.
    @Test(.enabled(if: PostgresTestServer.isAvailable, Comment(rawValue: PostgresTestServer.skipNote)))
    func aSilentNotificationConnectionIsReplacedAndReportsTheGap() async throws {
        let database = try await newDatabase(.postgres)
        let settings = try PostgresConfiguration(url: database)
        let nodeA = try await PostgresStore(configuration: settings, nodeID: "a", listenerCheck: .seconds(1), logger: Logger(label: "test"))
        let nodeB = try await PostgresStore(configuration: settings, nodeID: "b", logger: Logger(label: "test"))
        defer { try? nodeA.close() }
        /// What node A heard, shared with the task that follows its feed.
        final class Heard: Sendable { let list = Mutex<[String]>([]) }
        let heard = Heard()
        let following = Task {
            await nodeA.follow(onChange: { id in heard.list.withLock { $0.append(id) } }, onGap: { heard.list.withLock { $0.append("<gap>") } })
        }
        defer { following.cancel() }
        /// What node A heard once it heard `count` things, or after 60 s (a hang detector).
        func heardOnce(_ count: Int) async throws -> [String] {
            let clock = ContinuousClock()
            let started = clock.now
            while heard.list.withLock({ $0.count }) < count && clock.now - started < .seconds(60) {
                try await Task.sleep(for: .milliseconds(50))
            }
            return heard.list.withLock { $0 }
        }
        #expect(try await heardOnce(1) == ["<gap>"])
        let server = try await PostgresTestServer.shared()
        let name = PostgresTestServer.databaseName(of: database)
        let listener = try await server.psql(
            "SELECT pid FROM pg_stat_activity WHERE datname = '\(name)' AND application_name = '\(PostgresConfiguration.notificationsApplicationName)'"
        )
        let backend = try #require(pid_t(listener), "one notification connection: \(listener)")
        try #require(kill(backend, SIGSTOP) == 0)
        defer { kill(backend, SIGCONT) }
        // Within a check and its wait, the node gives the connection up, connects anew and reports the gap.
        #expect(try await heardOnce(2) == ["<gap>", "<gap>"])
        #expect(nodeA.cluster?.notifications == "ok")
        kill(backend, SIGCONT)
        // And hears the next transition.
        let user = try await nodeB.createUser(email: "ana@example.com", passwordHash: "h")
        _ = try await Self.insertAndApprove(pending("r1", user: user), on: nodeB)
        #expect(try await heardOnce(3) == ["<gap>", "<gap>", "r1"])
    }

    @Test(.enabled(if: PostgresTestServer.isAvailable, Comment(rawValue: PostgresTestServer.skipNote)))
    func aCommittedTransitionNotifiesTheOtherNodeAndACutConnectionRecovers() async throws {
        let database = try await newDatabase(.postgres)
        let settings = try PostgresConfiguration(url: database)
        let nodeA = try await PostgresStore(configuration: settings, nodeID: "a", logger: Logger(label: "test"))
        let nodeB = try await PostgresStore(configuration: settings, nodeID: "b", logger: Logger(label: "test"))
        let (changes, continuation) = AsyncStream.makeStream(of: String.self)
        let following = Task { await nodeA.follow(onChange: { continuation.yield($0) }, onGap: { continuation.yield("<gap>") }) }
        defer { following.cancel() }
        var received = changes.makeAsyncIterator()
        #expect(await received.next() == "<gap>")
        #expect(nodeA.cluster == ClusterHealth(node: "a", notifications: "ok"))
        let user = try await nodeB.createUser(email: "ana@example.com", passwordHash: "h")
        var machine = try await Self.insertAndApprove(pending("r1", user: user), on: nodeB)
        #expect(await received.next() == "r1")
        // The listening connection is cut: it comes back and reports the gap.
        let server = try await PostgresTestServer.shared()
        let name = PostgresTestServer.databaseName(of: database)
        let cut = try await server.psql(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = '\(name)' AND application_name = '\(PostgresConfiguration.notificationsApplicationName)'",
            database: name)
        #expect(cut == "1")
        #expect(await received.next() == "<gap>")
        #expect(nodeA.cluster?.notifications == "ok")
        guard case .persist(let completion) = machine.complete(at: Date()) else {
            Issue.record("complete refused")
            return
        }
        #expect(try await nodeB.apply(completion, to: machine.request))
        #expect(await received.next() == "r1")
        try nodeA.close()
    }
}

/// The `v7-trust` migration on PostgreSQL, on a database the version before it made.
@Suite struct PostgresTrustMigrationTests {
    @Test(.enabled(if: PostgresTestServer.isAvailable, Comment(rawValue: PostgresTestServer.skipNote)))
    func anUpgradeGivesIntegrationsTheirUsersAndTakesTheResetRightFromTheirDevices() async throws {
        let server = try await PostgresTestServer.shared()
        let url = try await server.newDatabase()
        let name = PostgresTestServer.databaseName(of: url)
        // setup: the schema up to v6, as that version left it, and its rows.
        var script = "CREATE TABLE schema_migrations (identifier text PRIMARY KEY, applied_at double precision NOT NULL);\n"
        for migration in PostgresStore.migrations.prefix(while: { $0.identifier != "v7-trust" }) {
            // (v8 runs too when the store opens: the secret below is re-encoded.)
            script += migration.statements.joined(separator: ";\n") + ";\n"
            script += "INSERT INTO schema_migrations VALUES ('\(migration.identifier)', 0);\n"
        }
        script += """
            INSERT INTO integrations (id, name, api_key_hash, enabled, created_at, webhook_url, webhook_secret)
                VALUES ('int_1', 'Acme', 'kh', true, 0, 'https://hooks.example.com/', 'whsec_-_8AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA');
            INSERT INTO users (id, email, password_hash, created_at) VALUES ('u_bob', 'bob@example.com', '', 0);
            INSERT INTO users (id, email, password_hash, created_at) VALUES ('u_ana', 'ana@example.com', '$2b$04$x', 0);
            INSERT INTO devices (id, user_id, name, platform, push_enabled, api_key_hash, created_at)
                VALUES ('d_enrolled', 'u_ana', 'tablet', 'ios', false, 'k1', 0), ('d_since', 'u_ana', 'phone 2', 'ios', false, 'k2', 0),
                       ('d_own', 'u_ana', 'phone', 'ios', false, 'k3', 0);
            INSERT INTO audit_events (at, kind, user_id, detail) VALUES (1, 'user_created', 'u_bob', 'integration Acme');
            INSERT INTO audit_events (at, kind, user_id, device_id, detail) VALUES (2, 'device_enrolled', 'u_ana', 'd_enrolled', 'integration Acme');
            INSERT INTO audit_events (at, kind, user_id, device_id, detail) VALUES (3, 'device_enrolled', 'u_ana', 'd_since', 'integration Acme');
            INSERT INTO audit_events (at, kind, user_id, device_id) VALUES (4, 'login_ok', 'u_ana', 'd_since');
            INSERT INTO audit_events (at, kind, user_id, device_id) VALUES (5, 'login_ok', 'u_ana', 'd_own');
            """
        try await server.psql(script, database: name)

        // act: the new version opens it.
        let store = try await PostgresStore(configuration: try PostgresConfiguration(url: url), nodeID: "upgrade", logger: Logger(label: "test"))

        // check
        #expect(try await store.user(email: "bob@example.com", reachableBy: "int_1")?.id == "u_bob")
        #expect(try await store.user(email: "ana@example.com", reachableBy: "int_1") == nil)
        #expect(try await store.device(id: "d_enrolled")?.mayApproveResets == false)
        #expect(try await store.device(id: "d_since")?.mayApproveResets == true)
        #expect(try await store.device(id: "d_own")?.mayApproveResets == true)
        // v8: the base64url secret is now the same bytes in base64.
        #expect(try await store.integration(id: "int_1")?.webhookSecret == "whsec_+/8AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=")
    }
}

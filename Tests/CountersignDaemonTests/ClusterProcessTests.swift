import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import PostgresTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Two real daemons on one PostgreSQL database behave as one: the requester
/// on one node, the device on the other; 50 completes split over both, one
/// wins; a node's notification connection cut, no wake-up lost; one node
/// killed with SIGKILL mid-flow while the other carries on.
@Suite(.enabled(if: PostgresTestServer.isAvailable, Comment(rawValue: PostgresTestServer.skipNote)))
struct ClusterProcessTests {
    typealias JSON = [String: any Sendable]

    static func call(
        _ method: HTTPMethod, _ url: String, json: JSON? = nil, headers: [(String, String)] = [], timeout: Int64 = 35
    ) async throws -> (Int, JSON) {
        try await IntegrationExamplesTests.call(method, url, json: json, headers: headers, timeout: timeout)
    }

    /// `countersign integration add NAME` on `database`: the integration's API key, as printed.
    static func addIntegration(_ name: String, database: String) async throws -> String {
        let added = try await DaemonProcessTests.command(["integration", "add", name, "--database", database])
        #expect(added.status == 0, "\(added.output)")
        return try #require(
            added.output.split(separator: "\n").first { $0.hasPrefix("API key:") }.map { $0.dropFirst(8).trimmingCharacters(in: .whitespaces) })
    }

    /// Creates ana@example.com through `requester`, enrolls her phone through `device`: the phone's key header.
    static func enrollAna(
        requester: String, device: String, auth: [(String, String)], fcmToken: String? = nil
    ) async throws -> [(String, String)] {
        #expect(try await call(.POST, "\(requester)/v1/users", json: ["email": "ana@example.com"], headers: auth).0 == 201)
        let code = try #require(
            try await call(.POST, "\(requester)/v1/users/ana@example.com/enrollments", headers: auth).1["enrollmentCode"] as? String)
        var body: JSON = ["enrollmentCode": code, "deviceName": "Ana's phone", "platform": "android"]
        if let fcmToken { body["fcmToken"] = fcmToken }
        let (enrolled, login) = try await call(.POST, "\(device)/api/mobile/auth/enroll", json: body)
        #expect(enrolled == 200)
        return [("X-API-Key", try #require(login["apiKey"] as? String))]
    }

    @Test func twoNodesOnOneDatabaseActAsOneDaemon() async throws {
        try await MailDeliveryProcessTests.withFolder { folder in
            let server = try await PostgresTestServer.shared()
            let database = try await server.newDatabase()
            let databaseName = PostgresTestServer.databaseName(of: database)
            let key = folder.appendingPathComponent("secret-key")
            try Data((0..<32).map { _ in UInt8.random(in: 0...255) }).write(to: key)
            let apiKey = try await Self.addIntegration("Cluster Admin", database: database)
            func start(_ node: Int) async throws -> RunningDaemon {
                try await MailDeliveryProcessTests.startDaemon(
                    ["--database", database, "--secret-key-file", key.path, "--node-id", "node-\(node)"],
                    log: folder.appendingPathComponent("node-\(node).log"))
            }
            var nodes = [try await start(0), try await start(1)]
            defer { for node in nodes { node.stop() } }
            var bases = nodes.map(\.base)
            for (index, base) in bases.enumerated() {
                let (status, health) = try await Self.call(.GET, "\(base)/healthz")
                #expect(status == 200)
                #expect(health["node"] as? String == "node-\(index)")
                #expect(health["notifications"] as? String == "ok")
            }

            // Enrolled through node 0, the device answers through node 1.
            let auth = [("Authorization", "Bearer \(apiKey)")]
            let device = try await Self.enrollAna(requester: bases[0], device: bases[1], auth: auth)

            /// Creates an approval on `requester`'s node, long-polls it there, answers on `approver`'s node;
            /// returns the id. The poll would wait 30 s and its client gives up after 25: an answer at all is the wake-up.
            func approve(requester: Int, approver: Int) async throws -> String {
                let bases = bases
                let (created, approval) = try await Self.call(
                    .POST, "\(bases[requester])/v1/approvals", json: ["user": "ana@example.com", "action": "sign_in", "title": "Sign in"],
                    headers: auth)
                #expect(created == 201)
                let id = try #require(approval["approvalId"] as? String)
                let number = try #require(approval["numberCode"] as? String)
                async let polled = Self.call(.GET, "\(bases[requester])/v1/approvals/\(id)?wait=30", headers: auth, timeout: 25)
                // The device sees it on the other node (no stale read), then answers there.
                let (_, pending) = try await Self.call(.GET, "\(bases[approver])/api/mobile/approvals/pending", headers: device)
                #expect((pending["approvals"] as? [JSON])?.contains { $0["requestId"] as? String == id } == true)
                try await DaemonProcessTests.waitForLongPolls(1, metrics: nodes[requester].metricsBase)
                let (answered, _) = try await Self.call(
                    .POST, "\(bases[approver])/api/mobile/approvals/\(id)/respond", json: ["decision": "approve", "numberCode": number],
                    headers: device)
                #expect(answered == 200)
                let (status, state) = try await polled
                #expect(status == 200)
                #expect(state["status"] as? String == "approved")
                return id
            }

            // The requester on node 0, the device on node 1: the long poll is woken across nodes.
            let first = try await approve(requester: 0, approver: 1)
            #expect(try await Self.call(.GET, "\(bases[1])/v1/approvals/\(first)", headers: auth).1["status"] as? String == "approved")

            // 50 concurrent completes split over both nodes: one 200, 49 × 409.
            let nodeBases = bases
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for index in 0..<50 {
                    group.addTask { try await Self.call(.POST, "\(nodeBases[index % 2])/v1/approvals/\(first)/complete", headers: auth).0 }
                }
                return try await group.reduce(into: [Int]()) { $0.append($1) }
            }
            #expect(statuses.filter { $0 == 200 }.count == 1)
            #expect(statuses.filter { $0 == 409 }.count == 49)

            // Node 0's notification connection is cut: it reconnects, and the next wake-up still arrives.
            let cut = try await server.psql(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = '\(databaseName)' AND application_name = 'countersign-notifications'",
                database: databaseName)
            #expect(cut == "2")
            let clock = ContinuousClock()
            let cutAt = clock.now
            while try await Self.call(.GET, "\(bases[0])/healthz").1["notifications"] as? String != "ok" {
                guard clock.now - cutAt < .seconds(60) else { throw PostgresTestError("node 0 did not reconnect") }
                try await Task.sleep(for: .milliseconds(50))
            }
            _ = try await approve(requester: 0, approver: 1)

            // A long poll parked while the connection is down re-reads after it comes back: nothing is lost.
            let (_, parked) = try await Self.call(
                .POST, "\(bases[0])/v1/approvals", json: ["user": "ana@example.com", "action": "sign_in", "title": "Parked"], headers: auth)
            let parkedID = try #require(parked["approvalId"] as? String)
            let parkedURL = "\(bases[0])/v1/approvals/\(parkedID)?wait=30"
            async let parkedPoll = Self.call(.GET, parkedURL, headers: auth, timeout: 25)
            try await DaemonProcessTests.waitForLongPolls(1, metrics: nodes[0].metricsBase)
            try await server.psql(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '\(databaseName)' AND application_name = 'countersign-notifications'",
                database: databaseName)
            #expect(
                try await Self.call(
                    .POST, "\(bases[1])/api/mobile/approvals/\(parkedID)/respond",
                    json: ["decision": "deny"], headers: device
                ).0 == 200)
            #expect(try await parkedPoll.1["status"] as? String == "denied")

            // Node 1 is killed mid-flow (an approval it created is pending): node 0 carries on with it.
            let (_, orphan) = try await Self.call(
                .POST, "\(bases[1])/v1/approvals", json: ["user": "ana@example.com", "action": "sign_in", "title": "Orphan"], headers: auth)
            let orphanID = try #require(orphan["approvalId"] as? String)
            let orphanNumber = try #require(orphan["numberCode"] as? String)
            kill(nodes[1].processIdentifier, SIGKILL)
            try await nodes[1].exited()
            #expect(
                try await Self.call(
                    .POST, "\(bases[0])/api/mobile/approvals/\(orphanID)/respond", json: ["decision": "approve", "numberCode": orphanNumber],
                    headers: device
                ).0 == 200)
            #expect(try await Self.call(.POST, "\(bases[0])/v1/approvals/\(orphanID)/complete", headers: auth).0 == 200)
            // And the killed node comes back to the same state.
            nodes[1] = try await start(1)
            bases[1] = nodes[1].base
            #expect(try await Self.call(.GET, "\(bases[1])/v1/approvals/\(orphanID)", headers: auth).1["status"] as? String == "completed")

            // The trail of the race: one completion.
            let trail = try await DaemonProcessTests.command(["audit", "--database", database, "--kind", "completed"])
            #expect(trail.output.split(separator: "\n").filter { $0.contains(" completed ") }.count == 2, "\(trail.output)")
            let logs = try [0, 1].map { try String(contentsOf: folder.appendingPathComponent("node-\($0).log"), encoding: .utf8) }.joined()
            #expect(!logs.contains(server.password) && !logs.contains(apiKey))
        }
    }
}

extension ClusterProcessTests {
    @Test func migrateMovesADaemonFromSQLiteAndItsLiveRequestsKeepWorking() async throws {
        try await MailDeliveryProcessTests.withFolder { folder in
            // A daemon on SQLite with an integration, a user, an enrolled device, a pending approval and audit rows.
            let file = folder.appendingPathComponent("countersign.sqlite").path
            let apiKey = try await Self.addIntegration("Moving Admin", database: file)
            let log = folder.appendingPathComponent("daemon.log")
            var daemon = try await MailDeliveryProcessTests.startDaemon(["--database", file], log: log)
            defer { daemon.stop() }
            var base = daemon.base
            let auth = [("Authorization", "Bearer \(apiKey)")]
            let device = try await Self.enrollAna(requester: base, device: base, auth: auth)
            let (_, approval) = try await Self.call(
                .POST, "\(base)/v1/approvals", json: ["user": "ana@example.com", "action": "sign_in", "title": "Before the move", "ttl": 300],
                headers: auth)
            let id = try #require(approval["approvalId"] as? String)
            let number = try #require(approval["numberCode"] as? String)
            kill(daemon.processIdentifier, SIGTERM)
            try await daemon.exited()

            // The move, then a second one refused: the target is no longer empty.
            let server = try await PostgresTestServer.shared()
            let database = try await server.newDatabase()
            let moved = try await DaemonProcessTests.command(["migrate", "--from", file, "--to", database])
            #expect(moved.status == 0, "\(moved.output)")
            #expect(moved.output.contains("users: 1") && moved.output.contains("devices: 1") && moved.output.contains("integrations: 1"))
            #expect(moved.output.contains("approval_requests: 1"))
            let auditLine = try #require(moved.output.split(separator: "\n").first { $0.contains("audit_events:") })
            #expect((Int(auditLine.split(separator: " ").last ?? "") ?? 0) >= 4, "\(moved.output)")
            #expect(!moved.output.contains(server.password))
            let again = try await DaemonProcessTests.command(["migrate", "--from", file, "--to", database])
            #expect(again.status != 0 && again.output.contains("is not empty"), "\(again.output)")

            // On PostgreSQL, with the SQLite daemon's key: the same keys work and the pending approval goes on.
            daemon = try await MailDeliveryProcessTests.startDaemon(
                ["--database", database, "--secret-key-file", folder.appendingPathComponent("countersign.key").path], log: log)
            base = daemon.base
            let (_, pending) = try await Self.call(.GET, "\(base)/api/mobile/approvals/pending", headers: device)
            #expect((pending["approvals"] as? [JSON])?.first?["title"] as? String == "Before the move")
            #expect(
                try await Self.call(
                    .POST, "\(base)/api/mobile/approvals/\(id)/respond", json: ["decision": "approve", "numberCode": number], headers: device
                ).0 == 200)
            #expect(try await Self.call(.POST, "\(base)/v1/approvals/\(id)/complete", headers: auth).0 == 200)
            let trail = try await DaemonProcessTests.command(["audit", "--database", database, "--email", "ana@example.com"])
            #expect(trail.output.contains("user_created") && trail.output.contains("completed"), "\(trail.output)")
        }
    }
}

extension ClusterProcessTests {
    @Test func bothNodesSweepButARequestExpiresOnce() async throws {
        try await MailDeliveryProcessTests.withFolder { folder in
            let database = try await PostgresTestServer.shared().newDatabase()
            let key = folder.appendingPathComponent("secret-key")
            try Data((0..<32).map { _ in UInt8.random(in: 0...255) }).write(to: key)
            let apiKey = try await Self.addIntegration("Sweeping Admin", database: database)
            var nodes: [RunningDaemon] = []
            defer { for node in nodes { node.stop() } }
            for node in 0..<2 {
                nodes.append(
                    try await MailDeliveryProcessTests.startDaemon(
                        ["--database", database, "--secret-key-file", key.path, "--node-id", "node-\(node)"],
                        log: folder.appendingPathComponent("node-\(node).log")))
            }
            let bases = nodes.map(\.base)
            let auth = [("Authorization", "Bearer \(apiKey)")]
            _ = try await Self.enrollAna(requester: bases[0], device: bases[1], auth: auth)
            let (_, approval) = try await Self.call(
                .POST, "\(bases[0])/v1/approvals", json: ["user": "ana@example.com", "action": "sign_in", "title": "Unanswered", "ttl": 10],
                headers: auth)
            let id = try #require(approval["approvalId"] as? String)
            // A long poll on the node that did not create it is answered by the expiry.
            let (_, polled) = try await Self.call(.GET, "\(bases[1])/v1/approvals/\(id)?wait=25", headers: auth)
            #expect(polled["status"] as? String == "expired")
            // Both nodes have swept past the deadline (each sweeps a few times a second); the trail has one expiry.
            try await Task.sleep(for: .seconds(3))
            let trail = try await DaemonProcessTests.command(["audit", "--database", database, "--kind", "expired"])
            #expect(trail.output.split(separator: "\n").filter { $0.contains(" expired ") }.count == 1, "\(trail.output)")
        }
    }

    @Test func aNodeWhoseDatabaseStopsAnsweringSaysSoAndRecovers() async throws {
        try await MailDeliveryProcessTests.withFolder { folder in
            let server = try await PostgresTestServer.shared()
            let database = try await server.newDatabase()
            let name = PostgresTestServer.databaseName(of: database)
            let key = folder.appendingPathComponent("secret-key")
            try Data((0..<32).map { _ in UInt8.random(in: 0...255) }).write(to: key)
            let apiKey = try await Self.addIntegration("Outage Admin", database: database)
            let log = folder.appendingPathComponent("node.log")
            let node = try await MailDeliveryProcessTests.startDaemon(
                ["--database", database, "--secret-key-file", key.path, "--node-id", "node-0"], log: log)
            defer { node.stop() }
            let base = node.base
            let auth = [("Authorization", "Bearer \(apiKey)")]
            // A call that times out says which, with the node's log.
            func call(_ step: String, _ method: HTTPMethod, _ path: String, json: String? = nil, timeout: Int64) async throws -> (Int, JSON) {
                do {
                    return try await DaemonProcessTests.http(method, base + path, json: json, headers: auth, timeout: timeout)
                } catch {
                    let text = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
                    throw PostgresTestError("\(step): \(error); node log:\n\(text.suffix(4000))")
                }
            }
            #expect(try await call("healthz before", .GET, "/healthz", timeout: 35).0 == 200)

            // The database refuses new connections, and the node's are cut.
            try await server.psql("ALTER DATABASE \(name) ALLOW_CONNECTIONS false")
            try await server.psql("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = '\(name)'")
            // Time for the node's pool to see its connections closed (see StoreSharedTests).
            try await Task.sleep(for: .seconds(1))
            let (down, health) = try await call("healthz down", .GET, "/healthz", timeout: 20)
            #expect(down == 503)
            #expect(health["status"] as? String == "unavailable")
            #expect(health["database"] as? String == "unavailable")
            // A request meanwhile gets the contract's error body, nothing of the fault in it.
            let (refused, body) = try await call("create down", .POST, "/v1/users", json: #"{"email":"ana@example.com"}"#, timeout: 20)
            #expect(refused == 503, "\(body)")
            #expect(body["success"] as? Bool == false)
            #expect(body["error"] as? String == "unavailable")
            #expect(body["retryAfter"] as? Int == 1)
            let message = try #require(body["message"] as? String)
            for word in ["postgres", "PSQL", "connection", name, "\(server.port)"] {
                #expect(!message.localizedCaseInsensitiveContains(word), "\(message)")
            }

            // The database answers again: so does the node, without a restart.
            try await server.psql("ALTER DATABASE \(name) ALLOW_CONNECTIONS true")
            var status = 0
            for _ in 0..<60 {
                status = (try? await DaemonProcessTests.http(.GET, "\(base)/healthz", timeout: 5))?.0 ?? 0
                if status == 200 { break }
                try await Task.sleep(for: .milliseconds(500))
            }
            #expect(status == 200, "\((try? String(contentsOf: log, encoding: .utf8)) ?? "")")
            #expect(try await call("create after", .POST, "/v1/users", json: #"{"email":"ana@example.com"}"#, timeout: 35).0 == 201)
            #expect(!((try? String(contentsOf: log, encoding: .utf8)) ?? "").contains(server.password))
        }
    }
}

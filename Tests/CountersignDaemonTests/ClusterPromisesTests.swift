import FakeFCM
import Foundation
import NIOHTTP1
import PostgresTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The cluster's promises, each through real daemons on one PostgreSQL
/// database over HTTP: one resolution push per transition, sent by the node
/// that committed it; `notifications: reconnecting` while a node cannot
/// listen; a limit counted across nodes; an outbox lease outliving its node;
/// TLS to the database, the server's certificate verified.
extension ClusterProcessTests {
    /// A new database with an integration, the shared secret key, and `count` nodes on it (`extra` flags for each).
    struct Cluster {
        let database: String
        let apiKey: String
        let key: URL
        let nodes: [RunningDaemon]
        var auth: [(String, String)] { [("Authorization", "Bearer \(apiKey)")] }
        var bases: [String] { nodes.map(\.base) }
        var metricsBases: [String] { nodes.map(\.metricsBase) }

        static func start(
            _ count: Int, folder: URL, database: String? = nil, extra: [String] = [], integration: [String] = []
        ) async throws -> Cluster {
            let server = try await PostgresTestServer.shared()
            let database = if let database { database } else { try await server.newDatabase() }
            let key = folder.appendingPathComponent("secret-key")
            try Data((0..<32).map { _ in UInt8.random(in: 0...255) }).write(to: key)
            let added = try await DaemonProcessTests.command(["integration", "add", "Cluster Admin", "--database", database] + integration)
            #expect(added.status == 0, "\(added.output)")
            let apiKey = try #require(
                added.output.split(separator: "\n").first { $0.hasPrefix("API key:") }.map { $0.dropFirst(8).trimmingCharacters(in: .whitespaces) })
            var nodes: [RunningDaemon] = []
            do {
                for node in 0..<count {
                    nodes.append(
                        try await RunningDaemon.start(
                            ["--database", database, "--secret-key-file", key.path, "--node-id", "node-\(node)"] + extra,
                            log: folder.appendingPathComponent("node-\(node).log")))
                }
                // Each node listens for the others' transitions before the test begins.
                for (index, node) in nodes.enumerated() {
                    try await ClusterProcessTests.eventually("node \(index) listens") {
                        try await ClusterProcessTests.call(.GET, "\(node.base)/healthz").1["notifications"] as? String == "ok"
                    }
                }
            } catch {
                for node in nodes { node.stop() }
                throw error
            }
            return Cluster(database: database, apiKey: apiKey, key: key, nodes: nodes)
        }

        func stop() { for node in nodes { node.stop() } }
    }

    /// The sum of the samples of `metric` on the node at `base` whose labels contain every one of `labels`.
    static func metric(_ metric: String, _ labels: [String], metrics: String) async throws -> Double {
        try await DaemonProcessTests.text("\(metrics)/metrics").split(separator: "\n")
            .filter { $0.hasPrefix(metric + "{") && labels.allSatisfy($0.contains) }
            .compactMap { Double($0.split(separator: " ").last ?? "") }
            .reduce(0, +)
    }

    /// Polls `condition` until it holds; the bound only turns a hang into a failure.
    static func eventually(_ what: String, _ condition: () async throws -> Bool) async throws {
        let clock = ContinuousClock()
        let start = clock.now
        while try await !condition() {
            guard clock.now - start < .seconds(60) else { throw PostgresTestError("never: \(what)") }
            try await Task.sleep(for: .milliseconds(50))
        }
    }

    @Test func eachTransitionSendsOneResolutionPushFromTheNodeThatCommittedIt() async throws {
        try await MailDeliveryProcessTests.withFolder { folder in
            let fake = try await FakeFCM()
            try await fake.serve { fcm in
                let account = folder.appendingPathComponent("fcm-service-account.json")
                try fake.serviceAccountJSON(base: fcm).write(to: account)
                let cluster = try await Cluster.start(
                    2, folder: folder,
                    extra: ["--fcm-service-account", account.path, "--fcm-endpoint", fcm, "--rate-limit", "respondPerDevice=1000/60"])
                defer { cluster.stop() }
                let bases = cluster.bases
                let auth = cluster.auth
                let device = try await Self.enrollAna(requester: bases[0], device: bases[1], auth: auth, fcmToken: "tok-ana-000001")

                func create(on node: Int, _ title: String) async throws -> (id: String, number: String) {
                    let (status, approval) = try await Self.call(
                        .POST, "\(bases[node])/v1/approvals", json: ["user": "ana@example.com", "action": "sign_in", "title": title], headers: auth)
                    #expect(status == 201)
                    return (try #require(approval["approvalId"] as? String), try #require(approval["numberCode"] as? String))
                }
                // Six approvals, each answered on both nodes at once: one node commits it.
                var committed = [0, 0]
                var ids: [String] = []
                for round in 0..<6 {
                    let (id, number) = try await create(on: round % 2, "Round \(round)")
                    let statuses = try await withThrowingTaskGroup(of: (Int, Int).self) { group in
                        for node in 0..<2 {
                            group.addTask {
                                let (status, _) = try await Self.call(
                                    .POST, "\(bases[node])/api/mobile/approvals/\(id)/respond",
                                    json: ["decision": "approve", "numberCode": number], headers: device)
                                return (node, status)
                            }
                        }
                        return try await group.reduce(into: [(Int, Int)]()) { $0.append($1) }
                    }
                    let winners = statuses.filter { $0.1 == 200 }.map(\.0)
                    #expect(winners.count == 1, "\(statuses)")
                    #expect(statuses.filter { $0.1 == 409 }.count == 1, "\(statuses)")
                    if let winner = winners.first { committed[winner] += 1 }
                    ids.append(id)
                }
                // The requester's cancel on node 1, and a denial on node 0.
                let (cancelled, _) = try await create(on: 0, "Cancelled")
                #expect(try await Self.call(.POST, "\(bases[1])/v1/approvals/\(cancelled)/cancel", headers: auth).0 == 200)
                committed[1] += 1
                let (denied, _) = try await create(on: 1, "Denied")
                #expect(
                    try await Self.call(.POST, "\(bases[0])/api/mobile/approvals/\(denied)/respond", json: ["decision": "deny"], headers: device).0
                        == 200)
                committed[0] += 1
                ids += [cancelled, denied]

                func resolutions() -> [String] {
                    fake.received.filter { $0.data["type"] == "approval_resolved" && $0.answeredOK }.compactMap { $0.data["requestId"] }
                }
                try await Self.eventually("a resolution push for each of \(ids.count) requests") { Set(resolutions()) == Set(ids) }
                // A barrier: one transition more, pushed after every earlier one had its turn on either node.
                let (barrier, barrierNumber) = try await create(on: 0, "Barrier")
                #expect(
                    try await Self.call(
                        .POST, "\(bases[0])/api/mobile/approvals/\(barrier)/respond", json: ["decision": "approve", "numberCode": barrierNumber],
                        headers: device
                    ).0 == 200)
                committed[0] += 1
                try await Self.eventually("the barrier's resolution push") { resolutions().contains(barrier) }

                // A push for each transition…
                let pushed = resolutions()
                #expect(Set(pushed) == Set(ids + [barrier]), "\(pushed)")
                // …each counted by the node that committed the transition, and by no other (a node counts
                // a push once FCM's answer is back, a moment after the fake has recorded it): one push per
                // transition. (The fake may have recorded one twice: a send whose answer outlasted the
                // daemon's 10 s request timeout on a busy machine is made again, as in production.)
                func counted(_ node: Int) async throws -> Int {
                    Int(
                        try await Self.metric(
                            "countersign_pushes_total", [#"type="approval_resolved""#, #"outcome="sent""#], metrics: cluster.metricsBases[node]))
                }
                try await Self.eventually("both nodes count what they sent") {
                    try await counted(0) + counted(1) == ids.count + 1
                }
                for node in 0..<2 {
                    let sent = try await counted(node)
                    #expect(sent == committed[node], "node \(node) sent \(sent), committed \(committed[node])")
                }
            }
        }
    }

    @Test func aNodeThatCannotListenSaysReconnectingUntilItListensAgain() async throws {
        try await MailDeliveryProcessTests.withFolder { folder in
            let server = try await PostgresTestServer.shared()
            let cluster = try await Cluster.start(2, folder: folder)
            defer { cluster.stop() }
            let name = PostgresTestServer.databaseName(of: cluster.database)
            func notifications(_ node: Int) async throws -> String? {
                try await Self.call(.GET, "\(cluster.bases[node])/healthz").1["notifications"] as? String
            }
            #expect(try await notifications(0) == "ok")

            // No new connection is let in, and the nodes' notification connections are cut;
            // the pools keep theirs, so the nodes still answer.
            try await server.psql("ALTER DATABASE \(name) ALLOW_CONNECTIONS false")
            defer { _ = try? server.psqlBlocking("ALTER DATABASE \(name) ALLOW_CONNECTIONS true") }
            let cut = try await server.psql(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = '\(name)' AND application_name = 'countersign-notifications'"
            )
            #expect(cut == "2")
            for node in 0..<2 {
                try await Self.eventually("node \(node) reports reconnecting") { try await notifications(node) == "reconnecting" }
            }
            // It stays so while the database refuses it (its retries back off up to 2 s).
            try await Task.sleep(for: .seconds(3))
            let (status, health) = try await Self.call(.GET, "\(cluster.bases[0])/healthz")
            #expect(health["notifications"] as? String == "reconnecting")
            #expect(status == 200 && health["database"] as? String == "ok", "\(health)")

            // Let in again: both listen, and say so.
            try await server.psql("ALTER DATABASE \(name) ALLOW_CONNECTIONS true")
            for node in 0..<2 {
                try await Self.eventually("node \(node) listens again") { try await notifications(node) == "ok" }
            }
            let logs = try String(contentsOf: folder.appendingPathComponent("node-0.log"), encoding: .utf8)
            #expect(logs.contains("notification connection restored"))
        }
    }

    @Test func aLimitReachedHalfOnEachNodeIsReached() async throws {
        try await MailDeliveryProcessTests.withFolder { folder in
            let cluster = try await Cluster.start(2, folder: folder, extra: ["--rate-limit", "approvalsPerUser=4/600"])
            defer { cluster.stop() }
            let bases = cluster.bases
            _ = try await Self.enrollAna(requester: bases[0], device: bases[1], auth: cluster.auth)
            func create(on node: Int) async throws -> (Int, JSON) {
                try await Self.call(
                    .POST, "\(bases[node])/v1/approvals", json: ["user": "ana@example.com", "action": "sign_in", "title": "Sign in"],
                    headers: cluster.auth)
            }
            // Two on each node: four in all, the limit.
            for node in [0, 1, 0, 1] { #expect(try await create(on: node).0 == 201) }
            // The fifth is refused on either node, though each saw only two.
            for node in [0, 1] {
                let (status, body) = try await create(on: node)
                #expect(status == 429, "\(body)")
                #expect(body["error"] as? String == "rate_limited")
            }
        }
    }

    /// A node killed with `kill -9` while its lease holds a webhook event
    /// (the receiver has the request and has not answered): once the lease
    /// lapses, the other node delivers the event, and it is accepted once.
    @Test func anOutboxLeaseOfAKilledNodeLapsesAndTheOtherNodeDeliversOnce() async throws {
        try await MailDeliveryProcessTests.withFolder { folder in
            let server = try await PostgresTestServer.shared()
            // The receiver holds its first request unanswered and accepts every later one.
            let receiver = try IntegrationExamplesTests.Running(
                "/usr/bin/env", ["python3", "-c", Self.holdingReceiver], environment: [:])
            defer { receiver.stop() }
            let portLine = try await receiver.waitFor("port") { $0.hasPrefix("port ") }
            let port = try #require(Int(portLine.dropFirst(5)))
            let cluster = try await Cluster.start(
                2, folder: folder, integration: ["--webhook-url", "http://127.0.0.1:\(port)/hook"])
            defer { cluster.stop() }
            let bases = cluster.bases
            let name = PostgresTestServer.databaseName(of: cluster.database)
            _ = try await Self.enrollAna(requester: bases[0], device: bases[0], auth: cluster.auth)
            let (_, approval) = try await Self.call(
                .POST, "\(bases[0])/v1/approvals", json: ["user": "ana@example.com", "action": "sign_in", "title": "Sign in"],
                headers: cluster.auth)
            let id = try #require(approval["approvalId"] as? String)
            #expect(try await Self.call(.POST, "\(bases[0])/v1/approvals/\(id)/cancel", headers: cluster.auth).0 == 200)

            // The event reaches the receiver, which holds it: the sending node's lease is on the row.
            let held = try await receiver.waitFor("the held request", timeout: .seconds(60)) { $0.hasPrefix("held ") }
            let event = String(held.dropFirst(5))
            let owner = try await server.psql("SELECT lease_owner FROM outbox WHERE id = '\(event)' AND state = 'pending'", database: name)
            let holder = try #require(["node-0", "node-1"].firstIndex(of: owner), "lease owner: \(owner)")
            let survivor = 1 - holder
            cluster.nodes[holder].signal(SIGKILL)
            try await cluster.nodes[holder].exited()

            // While the lease holds, the survivor (which looks every second) leaves the event alone.
            try await Task.sleep(for: .seconds(3))
            #expect(
                try await server.psql("SELECT state, lease_owner FROM outbox WHERE id = '\(event)'", database: name) == "pending|\(owner)")
            #expect(!receiver.output.contains { $0.hasPrefix("accepted ") })
            // The lease runs 2 minutes; its end is written as if they had passed.
            try await server.psql("UPDATE outbox SET lease_until = 0 WHERE id = '\(event)' AND lease_owner = '\(owner)'", database: name)
            try await Self.eventually("the event delivered") {
                try await server.psql("SELECT state FROM outbox WHERE id = '\(event)'", database: name) == "delivered"
            }
            // Delivered, it is never claimed again: the receiver accepted it once, from the survivor.
            _ = try await receiver.waitFor("the accepted event") { $0 == "accepted \(event)" }
            #expect(receiver.output.filter { $0 == "accepted \(event)" }.count == 1, "\(receiver.output)")
            #expect(receiver.output.filter { $0.hasPrefix("held ") }.count == 1)
            // Counted by the survivor (once the row is marked, a moment after the receiver's answer).
            try await Self.eventually("the survivor counts the delivery") {
                try await Self.metric(
                    "countersign_outbox_total", [#"kind="webhook""#, #"outcome="delivered""#], metrics: cluster.metricsBases[survivor]) >= 1
            }
            #expect(
                try await Self.metric(
                    "countersign_outbox_total", [#"kind="webhook""#, #"outcome="delivered""#], metrics: cluster.metricsBases[survivor]) == 1)
        }
    }

    /// A webhook receiver on 127.0.0.1: prints `port P`, then `held ID` for the
    /// first event (never answered), `accepted ID` for each later one (200).
    static let holdingReceiver = #"""
        import http.server, json, threading, time
        seen = []
        lock = threading.Lock()
        class Receiver(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                event = self.headers.get("Countersign-Event-Id") or json.loads(body).get("id", "?")
                with lock:
                    first = not seen
                    seen.append(event)
                if first:
                    print("held " + event, flush=True)
                    time.sleep(3600)
                    return
                print("accepted " + event, flush=True)
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()
            def log_message(self, *args):
                pass
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
        server.daemon_threads = True
        print("port %d" % server.server_address[1], flush=True)
        server.serve_forever()
        """#

    /// sslmode=verify-full against a server whose certificate a test authority signed:
    /// with that authority the node connects over TLS; with the system's it refuses.
    @Test func aNodeVerifiesTheDatabaseServersCertificate() async throws {
        try await MailDeliveryProcessTests.withFolder { folder in
            let server = try await PostgresTestServer.shared()
            let plain = try await server.newDatabase()
            let name = PostgresTestServer.databaseName(of: plain)
            let verified = plain.replacingOccurrences(
                of: "sslmode=disable", with: "sslmode=verify-full&sslrootcert=\(server.certificateAuthorityFile)")
            let cluster = try await Cluster.start(1, folder: folder, database: verified)
            defer { cluster.stop() }
            #expect(try await Self.call(.POST, "\(cluster.bases[0])/v1/users", json: ["email": "ana@example.com"], headers: cluster.auth).0 == 201)
            // Every connection of the node (its pool and its notification connection) is encrypted.
            let connections = try await server.psql(
                "SELECT count(*), bool_and(s.ssl) FROM pg_stat_activity a JOIN pg_stat_ssl s USING (pid) WHERE a.datname = '\(name)' AND a.application_name LIKE 'countersign%'"
            )
            let fields = connections.split(separator: "|")
            #expect((Int(fields.first ?? "") ?? 0) >= 2 && fields.last == "t", "\(connections)")

            // The system's authorities do not know the test authority: the certificate is refused,
            // said at once and in its own words (the pool alone retried for a minute, then named no cause).
            let untrusted = plain.replacingOccurrences(of: "sslmode=disable", with: "sslmode=verify-full")
            let refused = try await DaemonProcessTests.command(["user", "list", "--database", untrusted])
            #expect(refused.status != 0, "\(refused.output)")
            #expect(refused.output.contains("cannot open database") && refused.output.contains("CERTIFICATE_VERIFY_FAILED"), "\(refused.output)")
            #expect(!refused.output.contains(server.password))
            // So are a wrong password and a database that does not exist.
            let wrongPassword = plain.replacingOccurrences(of: ":\(server.password)@", with: ":not-the-password@")
            let denied = try await DaemonProcessTests.command(["user", "list", "--database", wrongPassword])
            #expect(denied.status != 0 && denied.output.contains("password authentication failed"), "\(denied.output)")
            #expect(!denied.output.contains("not-the-password"))
            let missing = try await DaemonProcessTests.command([
                "user", "list", "--database", plain.replacingOccurrences(of: "/\(name)?", with: "/nodb?"),
            ])
            #expect(missing.status != 0 && missing.output.contains("does not exist"), "\(missing.output)")
        }
    }
}

import AsyncHTTPClient
import CountersignWebhooks
import Foundation
import NIOCore
import NIOHTTP1
import Synchronization
import TestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The examples of `examples/` against the real binary: the relying service
/// signs a user in with a second factor; the webhook receiver, down while the
/// events are committed and the daemon is killed with SIGKILL, gets them
/// after both come back, checks their signatures and refuses a replay.
@Suite struct IntegrationExamplesTests {
    static let examples = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("examples")

    static func countersign(_ arguments: [String]) async throws -> (status: Int32, output: String) {
        try await DaemonProcessTests.command(arguments)
    }

    /// A process whose output lines are collected as they come.
    final class Running: Sendable {
        private let child = Mutex<TiedProcess?>(nil)
        private let lines = Mutex<[String]>([])

        init(_ executable: String, _ arguments: [String], environment: [String: String]) throws {
            let pipe = Pipe()
            pipe.fileHandleForReading.readabilityHandler = { [self] handle in
                let text = String(decoding: handle.availableData, as: UTF8.self)
                append(text.split(separator: "\n").map(String.init))
            }
            let child = try TiedProcess(
                URL(fileURLWithPath: executable), arguments, environment: ProcessInfo.processInfo.environment.merging(environment) { $1 },
                pipe: pipe)
            self.child.withLock { $0 = child }
        }

        var process: TiedProcess { child.withLock { $0! } }

        var output: [String] { lines.withLock { $0 } }

        private func append(_ more: [String]) { lines.withLock { $0 += more } }

        func waitFor(_ what: String, timeout: Duration = .seconds(30), _ match: (String) -> Bool) async throws -> String {
            let clock = ContinuousClock()
            let deadline = clock.now + timeout
            while clock.now < deadline {
                if let line = output.first(where: match) { return line }
                try await Task.sleep(for: .milliseconds(50))
            }
            throw TestError("no \(what) in: \(output.joined(separator: "\n"))")
        }

        func stop() { child.withLock { $0?.stop() } }
    }

    struct TestError: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }

    /// An HTTP call with a JSON object body.
    static func call(
        _ method: HTTPMethod, _ url: String, json: [String: any Sendable]? = nil, headers: [(String, String)] = [], timeout: Int64 = 35
    ) async throws -> (Int, [String: any Sendable]) {
        let text = try json.map { String(decoding: try JSONSerialization.data(withJSONObject: $0), as: UTF8.self) }
        return try await DaemonProcessTests.http(method, url, json: text, headers: headers, timeout: timeout)
    }

    @Test func theExamplesSignInAndReceiveEveryEventAfterKillDashNine() async throws {
        try await MailDeliveryProcessTests.withFolder { folder in
            // setup: an integration made by the CLI, its webhook on a port where nothing listens yet.
            let database = folder.appendingPathComponent("countersign.sqlite").path
            let hookPort = unusedPort()
            let added = try await Self.countersign([
                "integration", "add", "Example Admin", "--webhook-url", "http://127.0.0.1:\(hookPort)/hook", "--database", database,
            ])
            #expect(added.status == 0, "\(added.output)")
            func printed(_ label: String) throws -> String {
                let line = try #require(added.output.split(separator: "\n").first { $0.hasPrefix(label) })
                return String(line.dropFirst(label.count)).trimmingCharacters(in: .whitespaces)
            }
            let apiKey = try printed("API key:")
            let secret = try printed("webhook secret:")
            #expect(apiKey.hasPrefix("csk_") && apiKey.count >= 47)
            #expect(secret.hasPrefix("whsec_") && secret.count >= 49)
            let listed = try await Self.countersign(["integration", "list", "--database", database])
            #expect(listed.output.contains("Example Admin  enabled  prompts own and granted users  webhook http://127.0.0.1:\(hookPort)/hook"))
            #expect(!listed.output.contains(apiKey) && !listed.output.contains(secret))

            let log = folder.appendingPathComponent("daemon.log")
            var daemon = try await MailDeliveryProcessTests.startDaemon(["--database", database], log: log)
            defer { daemon.stop() }
            var base = daemon.base
            let auth = [("Authorization", "Bearer \(apiKey)")]
            #expect(try await Self.call(.POST, "\(base)/v1/users", json: ["email": "ana@example.com"], headers: auth).0 == 201)
            let (issued, enrollment) = try await Self.call(.POST, "\(base)/v1/users/ana@example.com/enrollments", headers: auth)
            #expect(issued == 201)
            let code = try #require(enrollment["enrollmentCode"] as? String)
            let (enrolled, login) = try await Self.call(
                .POST, "\(base)/api/mobile/auth/enroll", json: ["enrollmentCode": code, "deviceName": "Ana's phone", "platform": "android"])
            #expect(enrolled == 200)
            let deviceKey = try #require(login["apiKey"] as? String)

            // The relying service: shows the number, long-polls, completes.
            let signin = try Running(
                try await TestPython.path(), [Self.examples.appendingPathComponent("signin.py").path, "ana@example.com"],
                environment: ["COUNTERSIGN_URL": base, "COUNTERSIGN_API_KEY": apiKey])
            defer { signin.stop() }
            let prompt = try await signin.waitFor("number") { $0.contains("enter the number") }
            let number = try #require(prompt.split(separator: " ").last.map(String.init))
            let (pulled, pending) = try await Self.call(.GET, "\(base)/api/mobile/approvals/pending", headers: [("X-API-Key", deviceKey)])
            #expect(pulled == 200)
            let item = try #require((pending["approvals"] as? [[String: any Sendable]])?.first)
            #expect(item["title"] as? String == "Sign in to Example Admin")
            let approvalID = try #require(item["requestId"] as? String)
            let (answered, _) = try await Self.call(
                .POST, "\(base)/api/mobile/approvals/\(approvalID)/respond", json: ["decision": "approve", "numberCode": number],
                headers: [("X-API-Key", deviceKey)])
            #expect(answered == 200)
            _ = try await signin.waitFor("sign-in") { $0.contains("signed in, approved on Ana's phone") }
            let process = signin.process
            try await onOwnThread { process.waitUntilExit() }
            #expect(signin.process.terminationStatus == 0)

            // Both events are committed, undelivered (nobody listens): kill -9, then bring both back.
            let clock = ContinuousClock()
            let waitStart = clock.now
            while !(try String(contentsOf: log, encoding: .utf8).contains("delivery failed; will retry")) {
                guard clock.now - waitStart < .seconds(20) else { throw TestError("no failed webhook attempt logged") }
                try await Task.sleep(for: .milliseconds(100))
            }
            kill(daemon.processIdentifier, SIGKILL)
            try await daemon.exited()
            let receiver = try Running(
                try await TestPython.path(), [Self.examples.appendingPathComponent("webhook_receiver.py").path, "--port", "0"],
                environment: ["COUNTERSIGN_WEBHOOK_SECRET": secret])
            defer { receiver.stop() }
            // The receiver takes a port of its own; the webhook is pointed there (its secret kept).
            let listening = try await receiver.waitFor("listening") { $0.hasPrefix("listening on 127.0.0.1:") }
            let hook = "http://127.0.0.1:\(listening.split(separator: ":").last ?? "")/hook"
            let moved = try await Self.countersign(["integration", "set-webhook", "Example Admin", hook, "--database", database])
            #expect(moved.status == 0, "\(moved.output)")
            #expect(!moved.output.contains(secret))
            daemon = try await MailDeliveryProcessTests.startDaemon(["--database", database], log: log)
            base = daemon.base
            _ = try await receiver.waitFor("completed event", timeout: .seconds(60)) { $0.contains("approval.completed") }
            let events = receiver.output.filter { $0.hasPrefix("event ") }
            #expect(events.count == 2)
            #expect(events.first?.contains("approval.approved approval=\(approvalID) user=ana@example.com") == true)
            #expect(events.last?.contains("approval.completed approval=\(approvalID)") == true)

            // The receiver (PyPI's standardwebhooks) refuses a replay older than 5 minutes, even correctly
            // signed, and takes the same event signed now: the daemon's signing is the specification's.
            let body = Data(#"{"id":"evt_replay","type":"approval.approved","data":{"approvalId":"a","user":"u"}}"#.utf8)
            func signed(at timestamp: Int) -> HTTPClientRequest {
                var request = HTTPClientRequest(url: hook)
                request.method = .POST
                request.headers.add(name: WebhookSignature.idHeader, value: "evt_replay")
                request.headers.add(name: WebhookSignature.timestampHeader, value: String(timestamp))
                request.headers.add(
                    name: WebhookSignature.signatureHeader,
                    value: WebhookSignature.header(secrets: [secret], id: "evt_replay", timestamp: timestamp, body: body))
                request.body = .bytes(ByteBuffer(bytes: body))
                return request
            }
            let now = Int(Date().timeIntervalSince1970)
            #expect(try await HTTPClient.shared.execute(signed(at: now - 400), timeout: .seconds(120)).status.code == 400)
            #expect(try await HTTPClient.shared.execute(signed(at: now), timeout: .seconds(120)).status.code == 200)
            _ = try await receiver.waitFor("the event signed now") { $0.hasPrefix("event evt_replay ") }

            // `webhook list` shows both delivered; `webhook redeliver` sends one again, and the receiver deduplicates it.
            let list = try await Self.countersign(["webhook", "list", "--database", database])
            #expect(list.output.split(separator: "\n").filter { $0.contains("delivered") }.count == 2, "\(list.output)")
            // `audit --request` takes the request's reference as `webhook list` shows it, or the approval id a service holds.
            let reference = try #require(list.output.firstMatch(of: /request ([0-9a-f]{12})/)?.output.1).description
            #expect(!list.output.contains(approvalID))
            let byReference = try await Self.countersign(["audit", "--request", reference, "--database", database])
            let byID = try await Self.countersign(["audit", "--request", approvalID, "--database", database])
            #expect(byReference.status == 0 && byReference.output.contains("approved"), "\(byReference.output)")
            #expect(byID.output == byReference.output)
            let eventID = try #require(events.first?.split(separator: " ").dropFirst().first.map(String.init))
            let redeliver = try await Self.countersign(["webhook", "redeliver", eventID, "--database", database])
            #expect(redeliver.status == 0, "\(redeliver.output)")
            _ = try await receiver.waitFor("duplicate") { $0 == "duplicate \(eventID) ignored" }
            // A rotated secret: for a day events carry both signatures, so the receiver, still on the
            // old secret, keeps accepting them (it dedups only events whose signature it accepted).
            let rotation = try await Self.countersign(["integration", "rotate-webhook-secret", "Example Admin", "--database", database])
            #expect(rotation.status == 0, "\(rotation.output)")
            let words = rotation.output.split(whereSeparator: \.isWhitespace).map(String.init)
            let newSecret = try #require(words.first { $0.hasPrefix("whsec_") }, "\(rotation.output)")
            #expect(newSecret != secret)
            let secondID = try #require(events.last?.split(separator: " ").dropFirst().first.map(String.init))
            #expect(try await Self.countersign(["webhook", "redeliver", secondID, "--database", database]).status == 0)
            _ = try await receiver.waitFor("duplicate after the rotation") { $0 == "duplicate \(secondID) ignored" }
            // Audited like the daemon's own webhook events: the integration named.
            let redelivered = try await Self.countersign(["audit", "--kind", "webhook_redelivered", "--database", database])
            #expect(
                redelivered.output.contains("event \(eventID), integration Example Admin: countersign webhook redeliver"), "\(redelivered.output)")
            #expect(try await Self.countersign(["webhook", "list", "--failed", "--database", database]).output.contains("no failed deliveries"))

            // A test event asked for over the API (POST /v1/webhook/ping) passes the same library's check, signed with both secrets
            // during the rotation's day.
            let (pinged, ping) = try await Self.call(.POST, "\(base)/v1/webhook/ping", headers: auth)
            #expect(pinged == 202)
            let pingID = try #require(ping["eventId"] as? String)
            _ = try await receiver.waitFor("the ping", timeout: .seconds(60)) { $0 == "event \(pingID) webhook.ping" }

            // The operator's commands act on the running daemon at its next request.
            let approvalURL = "\(base)/v1/approvals/\(approvalID)"
            #expect(try await Self.countersign(["integration", "disable", "Example Admin", "--database", database]).status == 0)
            #expect(try await Self.call(.GET, approvalURL, headers: auth).0 == 401)
            #expect(try await Self.countersign(["integration", "enable", "Example Admin", "--database", database]).status == 0)
            #expect(try await Self.call(.GET, approvalURL, headers: auth).0 == 200)
            let rotated = try await Self.countersign(["integration", "rotate-key", "Example Admin", "--database", database])
            let newKey = try #require(
                rotated.output.split(whereSeparator: \.isWhitespace).last { $0.hasPrefix("csk_") }.map(String.init), "\(rotated.output)")
            #expect(try await Self.call(.GET, approvalURL, headers: auth).0 == 401)
            #expect(try await Self.call(.GET, approvalURL, headers: [("Authorization", "Bearer \(newKey)")]).0 == 200)
            let audit = try await Self.countersign(["audit", "--kind", "integration_key_rotated", "--database", database])
            #expect(audit.output.contains("integration Example Admin"), "\(audit.output)")
            // Only https webhooks, except to a loopback host.
            let plain = try await Self.countersign([
                "integration", "add", "Remote", "--webhook-url", "http://example.com/hook", "--database", database,
            ])
            #expect(plain.status != 0)
            #expect(plain.output.contains("only https://"))
            #expect(try await Self.countersign(["integration", "set-webhook", "Example Admin", "--none", "--database", database]).status == 0)

            // Keys are stored only as hashes: no key is in the database files.
            daemon.signal(SIGTERM)
            try await daemon.exited()
            for file in try FileManager.default.contentsOfDirectory(atPath: folder.path) where file.hasPrefix("countersign.sqlite") {
                let bytes = try Data(contentsOf: folder.appendingPathComponent(file))
                for key in [apiKey, newKey, code, deviceKey] { #expect(bytes.range(of: Data(key.utf8)) == nil, "\(file)") }
            }
            let text = try String(contentsOf: log, encoding: .utf8)
            for secret in [apiKey, newKey, secret, code, deviceKey] { #expect(!text.contains(secret)) }
        }
    }
}

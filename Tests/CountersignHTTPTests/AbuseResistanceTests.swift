import CountersignCore
import CountersignHTTP
import CountersignRuntime
import CountersignStore
import Foundation
import GRDB
import NIOHTTP1
import TestSupport
import Testing

@testable import DaemonTestSupport

@Suite struct AbuseResistanceTests {
    /// Each over-limit answer: 429, the contract body, `retryAfter` equal to `Retry-After`.
    static func expectLimited(_ answer: TestDaemon.Answer, message: String? = nil, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(answer.status == 429, sourceLocation: sourceLocation)
        #expect(answer["error"] == "rate_limited", sourceLocation: sourceLocation)
        #expect(answer.json["success"] as? Bool == false, sourceLocation: sourceLocation)
        let header = answer.headers.first(name: "Retry-After").flatMap(Int.init)
        #expect(header != nil && header == answer.json["retryAfter"] as? Int, sourceLocation: sourceLocation)
        if let message { #expect(answer["message"] == message, sourceLocation: sourceLocation) }
    }

    @Test func resetInitiationsPerEmailTripAtTheirCountAndResetAfterTheWindow() async throws {
        try await withTemporaryFolder { folder in
            let configuration = TestDaemon.configuration(folder) { $0.rateLimits[.resetInitiatePerEmail] = RateLimit(count: 3, window: 10) }
            let clock = ManualClock()
            try await TestDaemon.run(configuration, clock: clock) { daemon in
                let body: [String: any Sendable] = ["email": Fixture.email, "newPassword": Fixture.newPassword]
                for _ in 0..<3 {
                    #expect(try await daemon.call(.POST, "/api/mobile/auth/reset/phone/initiate", json: body).status == 200)
                }
                let limited = try await daemon.call(.POST, "/api/mobile/auth/reset/phone/initiate", json: body)
                Self.expectLimited(limited, message: "Too many reset attempts. Please try again later.")
                // Another email is not affected.
                #expect(
                    try await daemon.call(
                        .POST, "/api/mobile/auth/reset/phone/initiate", json: ["email": "bob@example.com", "newPassword": Fixture.newPassword]
                    ).status == 200)
                // The window ends on the daemon's clock.
                clock.advance(10.1)
                #expect(try await daemon.call(.POST, "/api/mobile/auth/reset/phone/initiate", json: body).status == 200)
            }
        }
    }

    @Test func resetInitiationsPerIPTrip() async throws {
        try await withTestDaemon(configure: { $0.rateLimits[.resetInitiatePerIP] = RateLimit(count: 4, window: 900) }) {
            daemon in
            for index in 0..<4 {
                let answer = try await daemon.call(
                    .POST, "/api/mobile/auth/reset/phone/initiate", json: ["email": "user\(index)@example.com", "newPassword": Fixture.newPassword])
                #expect(answer.status == 200)
            }
            let limited = try await daemon.call(
                .POST, "/api/mobile/auth/reset/phone/initiate", json: ["email": "user9@example.com", "newPassword": Fixture.newPassword])
            Self.expectLimited(limited, message: "Too many reset attempts. Please try again later.")
            #expect(limited.json["retryAfter"] as? Int ?? 0 > 800)
        }
    }

    @Test func failedLoginsPerEmailBlockEvenTheRightPassword() async throws {
        try await withTestDaemon { daemon in
            try await daemon.createUser(Fixture.email, password: Fixture.password)
            let wrong: [String: any Sendable] = ["email": Fixture.email, "password": "wrong-password", "deviceName": "d", "platform": "iOS"]
            // Successful logins do not count.
            for _ in 0..<3 { _ = try await daemon.login(Fixture.email, password: Fixture.password) }
            for _ in 0..<5 {
                #expect(try await daemon.call(.POST, "/api/mobile/auth/login", json: wrong).status == 401)
            }
            let right: [String: any Sendable] = ["email": Fixture.email, "password": Fixture.password, "deviceName": "d", "platform": "iOS"]
            Self.expectLimited(try await daemon.call(.POST, "/api/mobile/auth/login", json: right))
        }
    }

    @Test func failedLoginsPerIPTripAcrossEmails() async throws {
        try await withTestDaemon { daemon in
            for index in 0..<5 {
                let answer = try await daemon.call(
                    .POST, "/api/mobile/auth/login",
                    json: ["email": "user\(index)@example.com", "password": "whatever1", "deviceName": "d", "platform": "iOS"])
                #expect(answer.status == 401)
            }
            let limited = try await daemon.call(
                .POST, "/api/mobile/auth/login", json: ["email": "new@example.com", "password": "whatever1", "deviceName": "d", "platform": "iOS"])
            Self.expectLimited(limited)
        }
    }

    @Test func wrongPasswordsOnRefreshKeyTripPerDevice() async throws {
        try await withTestDaemon { daemon in
            try await daemon.createUser(Fixture.email, password: Fixture.password)
            let (key, _) = try await daemon.login(Fixture.email, password: Fixture.password)
            for _ in 0..<5 {
                #expect(try await daemon.call(.POST, "/api/mobile/auth/refresh-key", json: ["password": "wrong-one"], apiKey: key).status == 401)
            }
            Self.expectLimited(try await daemon.call(.POST, "/api/mobile/auth/refresh-key", json: ["password": Fixture.password], apiKey: key))
        }
    }

    @Test func statusPollsPerIPTripAndRecover() async throws {
        let clock = ManualClock()
        try await withTestDaemon(configure: { $0.rateLimits[.statusPollsPerIP] = RateLimit(count: 5, window: 60) }, clock: clock) {
            daemon in
            let (id, _) = try await daemon.initiate(Fixture.email, newPassword: Fixture.newPassword)
            for _ in 0..<5 { #expect(try await daemon.status(id).status == 200) }
            Self.expectLimited(try await daemon.status(id))
            clock.advance(59)
            Self.expectLimited(try await daemon.status(id))
            clock.advance(1.1)
            #expect(try await daemon.status(id).status == 200)
        }
    }

    @Test func answersPerDeviceTrip() async throws {
        // The daemon's clock stands still: the window cannot end however slowly the test runs.
        try await withTestDaemon(configure: { $0.rateLimits[.respondPerDevice] = RateLimit(count: 2, window: 60) }, clock: ManualClock()) {
            daemon in
            try await daemon.createUser(Fixture.email, password: Fixture.password)
            let (key, _) = try await daemon.login(Fixture.email, password: Fixture.password)
            let (id, _) = try await daemon.initiate(Fixture.email, newPassword: Fixture.newPassword)
            #expect(try await daemon.respond(id, apiKey: key, code: nil).status == 400)
            #expect(try await daemon.respond(id, apiKey: key, code: nil).status == 400)
            Self.expectLimited(try await daemon.respond(id, apiKey: key, code: nil))
        }
    }

    @Test func forwardedAddressesCountOnlyFromATrustedProxy() async throws {
        try await withTemporaryFolder { folder in
            let limit = RateLimit(count: 2, window: 60)
            // Trusted: each forwarded client has its own counter, and requesters see it.
            try await TestDaemon.run(
                TestDaemon.configuration(folder) {
                    $0.rateLimits[.statusPollsPerIP] = limit
                    $0.trustedProxies = [IPNetwork("127.0.0.1")!]
                },
                transport: .socket
            ) { daemon in
                let (id, _) = try await daemon.initiate(Fixture.email, newPassword: Fixture.newPassword)
                let path = "/api/mobile/auth/reset/phone/status/\(id)"
                for _ in 0..<2 { #expect(try await daemon.call(.GET, path, headers: [("X-Forwarded-For", "198.51.100.1")]).status == 200) }
                Self.expectLimited(try await daemon.call(.GET, path, headers: [("X-Forwarded-For", "198.51.100.1")]))
                #expect(try await daemon.call(.GET, path, headers: [("X-Forwarded-For", "198.51.100.2")]).status == 200)

                try await daemon.createUser(Fixture.email, password: Fixture.password)
                let (key, _) = try await daemon.login(Fixture.email, password: Fixture.password)
                let forwarded = try await daemon.call(
                    .POST, "/api/mobile/auth/reset/phone/initiate", json: ["email": Fixture.email, "newPassword": Fixture.newPassword],
                    headers: [("X-Forwarded-For", "203.0.113.7")])
                let item = try await daemon.call(.GET, "/api/mobile/approvals/\(forwarded["requestId"]!)", apiKey: key)
                #expect((item.json["requester"] as? [String: any Sendable])?["ip"] as? String == "203.0.113.7")
            }
            // Untrusted peer: the header is ignored, every request counts against 127.0.0.1.
            let other = try TemporaryFolder()
            defer { other.remove() }
            try await TestDaemon.run(TestDaemon.configuration(other) { $0.rateLimits[.statusPollsPerIP] = limit }, transport: .socket) { daemon in
                let (id, _) = try await daemon.initiate(Fixture.email, newPassword: Fixture.newPassword)
                let path = "/api/mobile/auth/reset/phone/status/\(id)"
                #expect(try await daemon.call(.GET, path, headers: [("X-Forwarded-For", "198.51.100.1")]).status == 200)
                #expect(try await daemon.call(.GET, path, headers: [("X-Forwarded-For", "198.51.100.2")]).status == 200)
                Self.expectLimited(try await daemon.call(.GET, path, headers: [("X-Forwarded-For", "198.51.100.3")]))
            }
        }
    }

    @Test func knownAndUnknownEmailsLookAlike() async throws {
        let pushes = RecordingPushSender()
        let clock = ManualClock()
        try await withTestDaemon(configure: { $0.broker.requestTTL = 60 }, pushSender: pushes, clock: clock) { daemon in
            try await daemon.createUser(Fixture.email, password: Fixture.password)
            _ = try await daemon.login(Fixture.email, password: Fixture.password, fcmToken: "token-ana-123456")
            let known = try await daemon.call(
                .POST, "/api/mobile/auth/reset/phone/initiate", json: ["email": Fixture.email, "newPassword": Fixture.newPassword])
            let unknown = try await daemon.call(
                .POST, "/api/mobile/auth/reset/phone/initiate", json: ["email": "ghost@example.com", "newPassword": Fixture.newPassword])
            #expect(known.status == unknown.status)
            #expect(Self.shape(known.text) == Self.shape(unknown.text))
            let ids = [try #require(known["requestId"]), try #require(unknown["requestId"])]
            var sequences: [[String]] = []
            for id in ids {
                sequences.append([try await daemon.status(id)["status"] ?? "?"])
            }
            // Both lifetimes end on the daemon's clock; the sweeper expires them and wakes the polls.
            clock.advance(61)
            for (index, id) in ids.enumerated() {
                let waited = try await daemon.status(id, wait: 30)
                sequences[index].append(waited["status"] ?? "?")
                #expect(Self.shape(waited.text) == Self.shape(try await daemon.status(id).text))
            }
            #expect(sequences[0] == ["pending", "expired"])
            #expect(sequences[1] == sequences[0])
            // Only the real account's device was prompted.
            #expect(pushes.prompts.map(\.requestID) == [known["requestId"]!])
        }
    }

    /// The JSON with every letter, digit, `-` and `_` inside strings replaced by `x`: keys, lengths and punctuation remain.
    static func shape(_ json: String) -> String {
        var shape = ""
        var inString = false
        for character in json {
            if character == "\"" {
                inString.toggle()
                shape.append(character)
                continue
            }
            if inString {
                shape.append(character.isNumber || character.isLetter || character == "-" || character == "_" ? "x" : character)
            } else {
                shape.append(character)
            }
        }
        return shape
    }

    @Test func aFraudReportSilencesPromptsUntilUnlocked() async throws {
        let pushes = RecordingPushSender()
        try await withTestDaemon(pushSender: pushes) { daemon in
            let user = try await daemon.createUser(Fixture.email, password: Fixture.password)
            let (key, deviceID) = try await daemon.login(Fixture.email, password: Fixture.password, fcmToken: "token-ana-123456")
            let (first, _) = try await daemon.initiate(Fixture.email, newPassword: Fixture.newPassword)
            let report = try await daemon.call(
                .POST, "/api/mobile/approvals/\(first)/respond", json: ["decision": "deny", "reportFraud": true], apiKey: key)
            #expect(report.status == 200)
            #expect(report["status"] == "denied")
            let silencedUntil = try #require(try await daemon.server.store.user(id: user.id)?.silencedUntil)
            #expect(silencedUntil.timeIntervalSinceNow > 3500)

            // The requester sees the normal answer; no device is prompted or can see the request.
            let (silent, code) = try await daemon.initiate(Fixture.email, newPassword: Fixture.newPassword)
            #expect(code != nil)
            #expect(try await daemon.status(silent)["status"] == "pending")
            let pending = try await daemon.call(.GET, "/api/mobile/approvals/pending", apiKey: key)
            #expect((pending.json["approvals"] as? [Any])?.isEmpty == true)
            #expect(try await daemon.respond(silent, apiKey: key, code: code).status == 404)
            try await Task.sleep(for: .milliseconds(200))
            #expect(pushes.prompts.map(\.requestID) == [first])

            // `countersign user unlock` lifts it.
            try await daemon.server.store.silencePrompts(userID: user.id, until: nil)
            let (after, afterCode) = try await daemon.initiate(Fixture.email, newPassword: Fixture.newPassword)
            #expect(try await daemon.respond(after, apiKey: key, code: afterCode).status == 200)
            // The silenced request's prompt would have been queued before this one's.
            #expect(try await pushes.prompts(count: 2).map(\.requestID) == [first, after])
            #expect(pushes.prompts.allSatisfy { $0.deviceID == deviceID })

            let events = try await daemon.server.store.auditEvents(since: nil, email: Fixture.email, kind: nil, limit: 100)
            #expect(events.contains { $0.kind == .fraudReported })
            #expect(events.contains { $0.kind == .promptSuppressed })

            #expect(
                try await daemon.call(
                    .POST, "/api/mobile/approvals/\(after)/respond", json: ["decision": "approve", "reportFraud": true], apiKey: key
                )
                .status == 400)
        }
    }

    @Test func theAuditTrailHoldsAFullFlowAndNoSecret() async throws {
        try await withTemporaryFolder { folder in
            let logs = LogCapture()
            let (secrets, (requestID, code)) = try await TestDaemon.run(
                TestDaemon.configuration(folder) { $0.rateLimits[.loginFailuresPerEmail] = RateLimit(count: 1, window: 60) }, transport: .socket,
                logs: logs
            ) { daemon in
                try await daemon.createUser(Fixture.email, password: Fixture.password)
                let (key, _) = try await daemon.login(Fixture.email, password: Fixture.password, fcmToken: "token-ana-123456")
                let (id, code) = try await daemon.initiate(Fixture.email, newPassword: Fixture.newPassword)
                #expect(try await daemon.respond(id, apiKey: key, code: code).status == 200)
                #expect(try await daemon.complete(id).status == 200)
                let wrong: [String: any Sendable] = ["email": Fixture.email, "password": "not-the-one", "deviceName": "d", "platform": "iOS"]
                #expect(try await daemon.call(.POST, "/api/mobile/auth/login", json: wrong).status == 401)
                #expect(try await daemon.call(.POST, "/api/mobile/auth/login", json: wrong).status == 429)
                return ([Fixture.password, Fixture.newPassword, key], (id, try #require(code)))
            }
            let store = try SQLiteStore(path: folder.databasePath, logger: LogCapture().logger())
            let events = try await store.auditEvents(since: nil, email: Fixture.email, kind: nil, limit: 100)
            let kinds = events.map(\.kind)
            #expect(kinds == [.loginSucceeded, .requestCreated, .approved, .completed, .passwordChanged, .loginFailed, .rateLimited])
            #expect(events.allSatisfy { $0.ip == "127.0.0.1" })
            #expect(events.first { $0.kind == .approved }?.deviceID != nil)
            try store.close()

            // No stored text value equals a secret or the number code, and no byte sequence holds a secret.
            let queue = try DatabaseQueue(path: folder.databasePath)
            let values: [String] = try await queue.read { db in
                var values: [String] = []
                for table in ["users", "devices", "approval_requests", "audit_events"] {
                    for row in try Row.fetchAll(db, sql: "SELECT * FROM \(table)") {
                        for column in row.columnNames {
                            if case .string(let text) = (row[column] as DatabaseValue).storage { values.append(text) }
                        }
                    }
                }
                return values
            }
            #expect(!values.isEmpty)
            for secret in secrets + [code] {
                #expect(!values.contains(secret))
                #expect(!values.contains { $0.contains(secret) && secret.count > 2 })
            }
            var bytes = Data()
            for suffix in ["", "-wal"] { bytes.append(FileManager.default.contents(atPath: folder.databasePath + suffix) ?? Data()) }
            for secret in secrets { #expect(bytes.range(of: Data(secret.utf8)) == nil) }
            // The request id is stored (it is the lookup key) but, being the requester's credential, never logged.
            let text = logs.text
            for secret in secrets + [requestID] { #expect(!text.contains(secret)) }
            #expect(!text.contains("numberCode"))
            #expect(!text.contains("code=\(code)") && !text.contains("code: \(code)"))
        }
    }
}

extension AbuseResistanceTests {
    /// A failed login for an unknown email costs the same bcrypt work as a
    /// wrong password for a known one (the decoy hash), so its time does not
    /// tell the two apart. Seen without timing: with room for one bcrypt job
    /// at a time, unknown-email logins sent together with a known one are
    /// turned away as busy (503), which a login that hashed nothing never is.
    @Test func failedLoginsForUnknownEmailsDoTheSameHashingWorkAsForKnownOnes() async throws {
        try await withTestDaemon(configure: {
            $0.bcryptCost = 10
            $0.bcryptQueue = 1
            $0.rateLimits[.loginFailuresPerEmail] = RateLimit(count: 1000, window: 60)
            $0.rateLimits[.loginFailuresPerIP] = RateLimit(count: 1000, window: 60)
        }) { daemon in
            try await daemon.createUser(Fixture.email, password: Fixture.password)
            let emails = [Fixture.email] + (0..<8).map { "ghost\($0)@example.com" }
            let statuses = try await withThrowingTaskGroup(of: (String, Int).self) { group in
                for email in emails {
                    group.addTask {
                        let answer = try await daemon.call(
                            .POST, "/api/mobile/auth/login",
                            json: ["email": email, "password": "not the password", "deviceName": "Phone", "platform": "iOS", "fcmToken": "t"])
                        return (email, answer.status)
                    }
                }
                return try await group.reduce(into: [String: Int]()) { $0[$1.0] = $1.1 }
            }
            #expect(statuses.values.allSatisfy { $0 == 401 || $0 == 503 }, "\(statuses)")
            // Nine logins at once, one bcrypt job at a time: some unknown email had to wait for a hash.
            #expect(statuses.contains { $0.key != Fixture.email && $0.value == 503 }, "\(statuses)")
        }
    }
}

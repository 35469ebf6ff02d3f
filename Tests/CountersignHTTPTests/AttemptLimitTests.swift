import CountersignCore
import CountersignHTTP
import CountersignRuntime
import CountersignStore
import Foundation
import NIOHTTP1
import TestSupport
import Testing

@testable import DaemonTestSupport

/// Failure limits that count before the work, the bounded bcrypt queue, and
/// refusals reported once per window.
@Suite struct AttemptLimitTests {
    static func parallel(_ count: Int, _ call: @escaping @Sendable (Int) async throws -> TestDaemon.Answer) async throws -> [TestDaemon.Answer] {
        try await withThrowingTaskGroup(of: TestDaemon.Answer.self) { group in
            for index in 0..<count { group.addTask { try await call(index) } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
    }

    @Test func aBurstOfParallelWrongLoginsGetsNoMoreGuessesThanTheLimit() async throws {
        // bcrypt cost 8: each guess takes long enough for the burst to be in flight at once.
        try await withTestDaemon(configure: { $0.bcryptCost = 8 }) { daemon in
            try await daemon.createUser(Fixture.email, password: Fixture.password)
            let answers = try await Self.parallel(50) { index in
                try await daemon.call(
                    .POST, "/api/mobile/auth/login",
                    json: ["email": Fixture.email, "password": "wrong guess \(index)", "deviceName": "d", "platform": "iOS"])
            }
            let statuses = answers.map(\.status)
            #expect(statuses.filter { $0 == 401 }.count <= 5)
            #expect(statuses.filter { $0 == 429 }.count >= 45)
            #expect(statuses.allSatisfy { $0 == 401 || $0 == 429 })
            // The right password is refused as well: this email's failures are used up.
            let right = try await daemon.call(
                .POST, "/api/mobile/auth/login", json: ["email": Fixture.email, "password": Fixture.password, "deviceName": "d", "platform": "iOS"])
            AbuseResistanceTests.expectLimited(right)
        }
    }

    /// email-reset.md: wrong codes count per client address before the work, 20 an hour by default.
    @Test func aBurstOfParallelWrongEmailCodesGetsNoMoreThanThePerAddressLimit() async throws {
        try await withMailDaemon(configure: { $0.bcryptCost = 8 }) { daemon, _ in
            try await daemon.createUser(Fixture.email, password: Fixture.password)
            #expect(try await daemon.emailInitiate(Fixture.email).status == 200)
            // 60 wrong codes at once, spread over the known address and nine unknown ones.
            let answers = try await Self.parallel(60) { index in
                let email = index % 10 == 0 ? Fixture.email : "nobody\(index % 10)@example.com"
                return try await daemon.emailVerify(email, code: String(format: "%06d", index), newPassword: Fixture.newPassword)
            }
            let statuses = answers.map(\.status)
            #expect(statuses.filter { $0 == 400 }.count <= 20, "\(statuses)")
            #expect(statuses.filter { $0 == 429 }.count >= 40, "\(statuses)")
            #expect(statuses.allSatisfy { $0 == 400 || $0 == 429 }, "\(statuses)")
        }
    }

    @Test func aSuccessfulLoginGivesItsAttemptBack() async throws {
        try await withTestDaemon(configure: { $0.rateLimits[.loginFailuresPerEmail] = RateLimit(count: 2, window: 900) }) { daemon in
            try await daemon.createUser(Fixture.email, password: Fixture.password)
            // Many successes never use up the failure limit.
            for _ in 0..<4 { _ = try await daemon.login(Fixture.email, password: Fixture.password) }
            let wrong: [String: any Sendable] = ["email": Fixture.email, "password": "nope nope", "deviceName": "d", "platform": "iOS"]
            #expect(try await daemon.call(.POST, "/api/mobile/auth/login", json: wrong).status == 401)
            _ = try await daemon.login(Fixture.email, password: Fixture.password)
            #expect(try await daemon.call(.POST, "/api/mobile/auth/login", json: wrong).status == 401)
            AbuseResistanceTests.expectLimited(try await daemon.call(.POST, "/api/mobile/auth/login", json: wrong))
        }
    }

    @Test func aBurstOfWrongPasswordsOnRefreshKeyGetsNoMoreThanTheLimit() async throws {
        try await withTestDaemon(configure: { $0.bcryptCost = 8 }) { daemon in
            try await daemon.createUser(Fixture.email, password: Fixture.password)
            let (key, _) = try await daemon.login(Fixture.email, password: Fixture.password)
            let answers = try await Self.parallel(30) { index in
                try await daemon.call(.POST, "/api/mobile/auth/refresh-key", json: ["password": "wrong \(index)"], apiKey: key)
            }
            #expect(answers.filter { $0.status == 401 }.count <= 5)
            #expect(answers.allSatisfy { $0.status == 401 || $0.status == 429 })
            let right = try await daemon.call(.POST, "/api/mobile/auth/refresh-key", json: ["password": Fixture.password], apiKey: key)
            AbuseResistanceTests.expectLimited(right)
        }
    }

    @Test func aFullHashingQueueAnswers503WithRetryAfterInsteadOfQueueing() async throws {
        try await withTestDaemon(configure: {
            $0.bcryptCost = 10
            $0.bcryptQueue = 1
            $0.rateLimits[.resetInitiatePerIP] = RateLimit(count: 1000, window: 900)
        }) { daemon in
            let answers = try await Self.parallel(16) { index in
                try await daemon.call(
                    .POST, "/api/mobile/auth/reset/phone/initiate", json: ["email": "user\(index)@example.com", "newPassword": Fixture.newPassword])
            }
            let busy = answers.filter { $0.status == 503 }
            #expect(!busy.isEmpty)
            #expect(answers.allSatisfy { $0.status == 200 || $0.status == 503 })
            for answer in busy {
                #expect(answer["error"] == "unavailable")
                #expect(answer.headers.first(name: "Retry-After") == "1")
                #expect(answer.json["retryAfter"] as? Int == 1)
            }
            // Once the burst has passed, hashing works again.
            #expect(try await daemon.initiate(Fixture.email, newPassword: Fixture.newPassword).requestID.isEmpty == false)
        }
    }

    /// trust.md: the first refusal of a window is audited at once; the later
    /// ones are one summary when the window ends.
    @Test func aFloodOfRefusalsWritesTheFirstAtOnceAndOneSummaryPerWindow() async throws {
        let logs = LogCapture()
        let clock = ManualClock()
        try await withTestDaemon(
            .socket, configure: { $0.rateLimits[.statusPollsPerIP] = RateLimit(count: 5, window: 10) }, logs: logs, clock: clock
        ) { daemon in
            // 50 polls in one window: the daemon's clock does not move while they run.
            var refused = 0
            var inTheTrailAtTheFirstRefusal: Int?
            for _ in 0..<50 where try await daemon.status("AAAAAAAAAAAAAAAAAAAAAA").status == 429 {
                refused += 1
                if refused == 1 {
                    // Durable before its answer (trust.md: a `kill -9` may lose a summary, never the first
                    // event): in the store as soon as the 429 arrives, read once, without waiting.
                    inTheTrailAtTheFirstRefusal = try await daemon.server.store.auditEvents(
                        since: nil, email: nil, kind: .rateLimited, limit: 100
                    ).count
                }
            }
            #expect(refused == 45)
            #expect(inTheTrailAtTheFirstRefusal == 1)
            // The first refusal is in the trail while the window is still open (the clock has not moved).
            let first = try await daemon.waitForAudit(.rateLimited)
            #expect(first.count == 1)
            #expect(first.first?.detail == "statusPollsPerIP: 127.0.0.1")
            #expect(first.first?.ip == "127.0.0.1")
            #expect(try await daemon.server.store.auditEvents(since: nil, email: nil, kind: .rateLimitedSummary, limit: 100).isEmpty)
            // The other 44 are one summary when the window ends (the reporter looks every second).
            clock.advance(10.1)
            let summary = try await daemon.waitForAudit(.rateLimitedSummary)
            #expect(summary.count == 1)
            #expect(summary.first?.detail == "statusPollsPerIP: 44 more refused after the first")
            #expect(summary.first?.ip == "127.0.0.1")
            #expect(try await daemon.server.store.auditEvents(since: nil, email: nil, kind: .rateLimited, limit: 100).count == 1)
            #expect(logs.text.components(separatedBy: "rate limited").count - 1 == 1)
        }
    }
}

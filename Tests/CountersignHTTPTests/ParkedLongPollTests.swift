import CountersignCore
import CountersignHTTP
import CountersignRuntime
import Foundation
import TestSupport
import Testing

@testable import DaemonTestSupport

/// A long poll that must wait is parked on its connection, with its route
/// returned: what a client sees must be what it saw when the route waited.
@Suite struct ParkedLongPollTests {
    /// One answer per poll, the real one, in order: a request pipelined behind
    /// a parked poll is answered after it, on the same connection, and the
    /// route's dropped first answer never reaches the client.
    @Test func aParkedPollIsAnsweredOnceAndInOrderOnItsConnection() async throws {
        try await withTestDaemon(.socket) { daemon in
            try await daemon.createUser(Fixture.email, password: Fixture.password)
            let (key, _) = try await daemon.login(Fixture.email, password: Fixture.password)
            let (id, code) = try await daemon.initiate(Fixture.email, newPassword: Fixture.newPassword)
            let connection = try RawConnection(port: try ConnectionLimitTests.port(daemon))
            connection.send(
                "GET /api/mobile/auth/reset/phone/status/\(id)?wait=30 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
                    + "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            try await Self.waitForParked(1, in: daemon)
            // Nothing is written while the poll waits: not the route's dropped answer, nor the health check behind it.
            #expect(await connection.read(for: .milliseconds(300)) == "")

            #expect(try await daemon.respond(id, apiKey: key, code: code).status == 200)
            let text = await connection.read(until: { $0.components(separatedBy: "HTTP/1.1 ").count == 3 && $0.hasSuffix("}") }, limit: .seconds(25))
            let answers = text.components(separatedBy: "HTTP/1.1 ").dropFirst()
            #expect(answers.count == 2, "two answers: \(text)")
            let poll = try #require(answers.first)
            #expect(poll.hasPrefix("200"))
            #expect(poll.contains(#""status":"approved""#))
            #expect(poll.lowercased().contains("content-type: application/json"))
            #expect(answers.last?.hasPrefix("200") == true)
            #expect(!text.lowercased().contains("x-countersign-parked"))
            // The slot is given back.
            #expect(try await daemon.longPollsWaiting() == 0)
        }
    }

    /// The answer after the wait is the same poll: it counts once against
    /// the poll limit, and once in the request metrics.
    @Test func aParkedPollCountsOnce() async throws {
        try await withTestDaemon(.socket, configure: { $0.rateLimits[.statusPollsPerIP] = RateLimit(count: 2, window: 3600) }) { daemon in
            let (id, _) = try await daemon.initiate(Fixture.email, newPassword: Fixture.newPassword)
            // Parked, then answered at its timeout with the state it had.
            let waited = try await daemon.status(id, wait: 1)
            #expect(waited.status == 200)
            #expect(waited["status"] == "pending")
            #expect(try await daemon.status(id).status == 200)
            #expect(try await daemon.status(id).status == 429)
            let counted = try await daemon.metricsText().split(separator: "\n").first {
                $0.hasPrefix("countersign_http_requests_total{") && $0.contains("status/{requestId}") && $0.contains(#"status="200""#)
            }
            #expect(counted.flatMap { $0.split(separator: " ").last } == "2", "\(String(describing: counted))")
        }
    }

    /// A client that hangs up while its poll is handed over, before it parks,
    /// still gives its slot back.
    @Test func aClientGoneBeforeItsPollParksGivesItsSlotBack() async throws {
        try await withTestDaemon(
            .socket,
            configure: {
                $0.rateLimits[.statusPollsPerIP] = RateLimit(count: 10_000, window: 60)
                $0.connectionsPerAddress = 0
            }
        ) { daemon in
            let (id, _) = try await daemon.initiate(Fixture.email, newPassword: Fixture.newPassword)
            for _ in 0..<20 {
                let connection = try RawConnection(port: try ConnectionLimitTests.port(daemon))
                connection.send("GET /api/mobile/auth/reset/phone/status/\(id)?wait=30 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                // Closed at once: some are gone before their route runs, some while it runs, some once parked.
                _ = connection
            }
            let clock = ContinuousClock()
            let start = clock.now
            while clock.now - start < .seconds(25) {
                if try await daemon.longPollsWaiting() == 0, await daemon.server.broker.waiterCount == 0 { break }
                try await Task.sleep(for: .milliseconds(20))
            }
            #expect(try await daemon.longPollsWaiting() == 0)
            #expect(await daemon.server.broker.waiterCount == 0)
        }
    }

    /// Returns once `count` polls wait in the broker; the bound is a hang detector.
    static func waitForParked(_ count: Int, in daemon: TestDaemon) async throws {
        try await daemon.waitForLongPolls(count)
        let clock = ContinuousClock()
        let start = clock.now
        while await daemon.server.broker.waiterCount < count {
            guard clock.now - start < .seconds(25) else { throw TestFailure("\(count) long polls never parked in the broker") }
            try await Task.sleep(for: .milliseconds(20))
        }
    }
}

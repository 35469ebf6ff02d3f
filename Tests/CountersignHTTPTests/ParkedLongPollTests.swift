import CountersignHTTP
import CountersignRuntime
import Foundation
import NIOHTTP1
import TestSupport
import Testing

@testable import CountersignCore
@testable import DaemonTestSupport

/// A long poll that must wait is parked with the broker, with its route
/// returned and no task held: what a client sees must be what it saw when the route waited.
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
            // The second is the health check's, not the poll's again.
            let health = try #require(answers.last)
            #expect(health.hasPrefix("200"))
            #expect(!health.contains("requestId"))
            #expect(!text.lowercased().contains("x-countersign-parked"))
            // Nothing more follows.
            #expect(await connection.read(for: .milliseconds(300)) == "")
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
        try await withTestDaemon(.socket, configure: HungUpLongPollTests.manyPollsFromOneAddress) { daemon in
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

    /// Kept-alive: one connection carries a poll that times out, then one
    /// woken by the approval, each answered once; one that asks the server to
    /// close is answered before the connection closes.
    @Test func aConnectionCarriesPollAfterPollAndClosesWhenAsked() async throws {
        try await withTestDaemon(.socket) { daemon in
            try await daemon.createUser(Fixture.email, password: Fixture.password)
            let (key, _) = try await daemon.login(Fixture.email, password: Fixture.password)
            let (id, code) = try await daemon.initiate(Fixture.email, newPassword: Fixture.newPassword)
            let connection = try RawConnection(port: try ConnectionLimitTests.port(daemon))
            let poll = { (wait: Int, header: String) in
                "GET /api/mobile/auth/reset/phone/status/\(id)?wait=\(wait) HTTP/1.1\r\nHost: 127.0.0.1\r\n\(header)\r\n"
            }

            connection.send(poll(1, ""))
            let first = await connection.read(until: { $0.contains(#""status":"pending""#) }, limit: .seconds(25))
            #expect(first.hasPrefix("HTTP/1.1 200"))

            connection.send(poll(30, ""))
            try await Self.waitForParked(1, in: daemon)
            #expect(try await daemon.respond(id, apiKey: key, code: code).status == 200)
            let second = await connection.read(until: { $0.contains(#""status":"approved""#) }, limit: .seconds(25))
            #expect(second.hasPrefix("HTTP/1.1 200"))
            #expect(second.components(separatedBy: "HTTP/1.1 ").count == 2, "one answer: \(second)")

            // Approved now: a poll with `Connection: close` is answered at once, then the connection closes.
            connection.send(poll(30, "Connection: close\r\n"))
            let last = await connection.waitForClose(limit: .seconds(25))
            #expect(last?.text.contains(#""status":"approved""#) == true)
            #expect(try await daemon.longPollsWaiting() == 0)
        }
    }

    /// A parked poll asking the server to close its connection gets its answer first.
    @Test func aParkedPollWithConnectionCloseIsAnsweredThenClosed() async throws {
        try await withTestDaemon(.socket) { daemon in
            let (id, _) = try await daemon.initiate(Fixture.email, newPassword: Fixture.newPassword)
            let connection = try RawConnection(port: try ConnectionLimitTests.port(daemon))
            connection.send("GET /api/mobile/auth/reset/phone/status/\(id)?wait=30 HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            try await Self.waitForParked(1, in: daemon)
            // A newer request supersedes it, which wakes the poll.
            _ = try await daemon.initiate(Fixture.email, newPassword: Fixture.newPassword)
            let closed = try #require(await connection.waitForClose(limit: .seconds(25)))
            #expect(closed.text.hasPrefix("HTTP/1.1 200"))
            #expect(closed.text.contains(#""status":"cancelled""#))
        }
    }

    /// A recheck after a gap in a cluster's notifications wakes a parked poll
    /// whose request has not changed: it reads the request and parks again,
    /// with nothing written, until the change answers it.
    @Test func aParkedPollWokenByARecheckWaitsOn() async throws {
        try await withTestDaemon(.socket) { daemon in
            try await daemon.createUser(Fixture.email, password: Fixture.password)
            let (key, _) = try await daemon.login(Fixture.email, password: Fixture.password)
            let (id, code) = try await daemon.initiate(Fixture.email, newPassword: Fixture.newPassword)
            let connection = try RawConnection(port: try ConnectionLimitTests.port(daemon))
            connection.send("GET /api/mobile/auth/reset/phone/status/\(id)?wait=30 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            try await Self.waitForParked(1, in: daemon)
            await daemon.server.broker.recheckAll()
            // Taken for a change, the recheck would answer `pending` now.
            #expect(await connection.read(for: .milliseconds(300)) == "")
            try await Self.waitForParked(1, in: daemon)
            #expect(try await daemon.respond(id, apiKey: key, code: code).status == 200)
            let answer = await connection.read(until: { $0.contains(#""status":"approved""#) }, limit: .seconds(25))
            #expect(answer.hasPrefix("HTTP/1.1 200"))
            #expect(answer.components(separatedBy: "HTTP/1.1 ").count == 2, "one answer: \(answer)")
        }
    }

    /// The answer after the wait checks the caller again: an approvals-API poll
    /// whose key was rotated while it waited is refused, as any call with that key.
    @Test func aV1PollWhoseKeyIsRotatedWhileItWaitsIsRefused() async throws {
        try await withTestDaemon(.socket) { daemon in
            let acme = try await daemon.addIntegration("Acme Admin")
            _ = try await daemon.v1(.POST, "/v1/users", key: acme.key, json: ["email": Fixture.email])
            let (_, deviceKey, _) = try await daemon.enroll(Fixture.email, integrationKey: acme.key, deviceName: "Ana's iPhone")
            let created = try await daemon.v1(.POST, "/v1/approvals", key: acme.key, json: ApprovalsAPITests.approval)
            let id = try #require(created["approvalId"])
            let poll = Task { try await daemon.v1(.GET, "/v1/approvals/\(id)?wait=30", key: acme.key, timeout: .seconds(25)) }
            try await Self.waitForParked(1, in: daemon)
            #expect(try await daemon.server.store.rotateIntegrationKey(id: acme.id, apiKeyHash: SecureToken.sha256Hex(Integration.newAPIKey())))
            #expect(try await daemon.respond(id, apiKey: deviceKey, code: created["numberCode"]).status == 200)
            let refused = try await poll.value
            #expect(refused.status == 401)
            // The contract's error body, as any refused call gets.
            #expect(refused["error"] == "unauthorized")
            #expect(try await daemon.longPollsWaiting() == 0)
        }
    }

    /// A server that shuts down answers its parked approvals-API polls at once
    /// with the state they have (not at their 30 s timeout, which the 25 s
    /// client timeout catches), and every later poll without a wait.
    @Test func parkedV1PollsAreAnsweredWhenTheServerDrains() async throws {
        try await withTestDaemon(.socket) { daemon in
            let acme = try await daemon.addIntegration("Acme Admin")
            _ = try await daemon.v1(.POST, "/v1/users", key: acme.key, json: ["email": Fixture.email])
            _ = try await daemon.enroll(Fixture.email, integrationKey: acme.key, deviceName: "Ana's iPhone")
            let created = try await daemon.v1(.POST, "/v1/approvals", key: acme.key, json: ApprovalsAPITests.approval)
            let id = try #require(created["approvalId"])
            let polls = (0..<2).map { _ in Task { try await daemon.v1(.GET, "/v1/approvals/\(id)?wait=30", key: acme.key, timeout: .seconds(25)) } }
            try await Self.waitForParked(2, in: daemon)
            await daemon.server.broker.drain()
            for poll in polls {
                let answer = try await poll.value
                #expect(answer.status == 200)
                #expect(answer["status"] == "pending")
            }
            let later = try await daemon.v1(.GET, "/v1/approvals/\(id)?wait=30", key: acme.key, timeout: .seconds(25))
            #expect(later["status"] == "pending")
            #expect(await daemon.server.broker.waiterCount == 0)
            #expect(try await daemon.longPollsWaiting() == 0)
        }
    }

    /// A parked poll woken with its request already read (as one read serves every poll another node's
    /// change wakes on a cluster, or as its own node committed it) answers from that read, on both status
    /// routes. The read given here says `approved` while the store still holds the request pending: an
    /// answer that read the store again would say `pending`.
    @Test(arguments: ["phone reset", "approvals API"]) func aParkedPollWokenWithARequestAnswersFromIt(route: String) async throws {
        try await withTestDaemon(.socket) { daemon in
            let id: String
            let answer: Task<String, any Error>
            let plainPoll: @Sendable () async throws -> String?
            if route == "phone reset" {
                id = try await daemon.initiate(Fixture.email, newPassword: Fixture.newPassword).0
                let connection = try RawConnection(port: try ConnectionLimitTests.port(daemon))
                connection.send("GET /api/mobile/auth/reset/phone/status/\(id)?wait=30 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                answer = Task { await connection.read(until: { $0.hasSuffix("}") }, limit: .seconds(25)) }
                plainPoll = { try await daemon.status(id)["status"] }
            } else {
                let acme = try await daemon.addIntegration("Acme Admin")
                _ = try await daemon.v1(.POST, "/v1/users", key: acme.key, json: ["email": Fixture.email])
                _ = try await daemon.enroll(Fixture.email, integrationKey: acme.key, deviceName: "Ana's iPhone")
                let created = try await daemon.v1(.POST, "/v1/approvals", key: acme.key, json: ApprovalsAPITests.approval)
                let approvalID = try #require(created["approvalId"])
                id = approvalID
                answer = Task { try await daemon.v1(.GET, "/v1/approvals/\(approvalID)?wait=30", key: acme.key, timeout: .seconds(25)).text }
                plainPoll = { try await daemon.v1(.GET, "/v1/approvals/\(approvalID)", key: acme.key)["status"] }
            }
            try await Self.waitForParked(1, in: daemon)
            var read = try #require(try await daemon.server.store.request(id: id))
            #expect(read.state == .pending)
            read.state = .approved
            read.completeBy = Date().addingTimeInterval(60)

            await daemon.server.broker.wake(id, .read(ReadForWaiters(read)))

            let text = try await answer.value
            #expect(text.contains(#""status":"approved""#), "\(text)")
            // The store was not changed: a poll now reads it.
            #expect(try await plainPoll() == "pending")
            #expect(try await daemon.longPollsWaiting() == 0)
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

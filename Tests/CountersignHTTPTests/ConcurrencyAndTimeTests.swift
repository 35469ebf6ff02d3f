import CountersignCore
import CountersignHTTP
import CountersignRuntime
import CountersignStore
import Foundation
import NIOHTTP1
import TestSupport
import Testing

@testable import DaemonTestSupport

@Suite struct ConcurrencyAndTimeTests {
    @Test func fiftyConcurrentAnswersHaveExactlyOneWinner() async throws {
        // The per-device answer limit would refuse most of the fifty; this test is about the race.
        try await withTestDaemon(configure: { $0.rateLimits[.respondPerDevice] = RateLimit(count: 100, window: 60) }) {
            daemon in
            try await daemon.createUser(Fixture.email, password: Fixture.password)
            let (first, _) = try await daemon.login(Fixture.email, password: Fixture.password, device: "A", fcmToken: "token-a")
            let (second, _) = try await daemon.login(Fixture.email, password: Fixture.password, device: "B", fcmToken: "token-b")
            let (id, code) = try await daemon.initiate(Fixture.email, newPassword: Fixture.newPassword)

            let statuses = try await withThrowingTaskGroup(of: (Int, String?).self) { group in
                for index in 0..<50 {
                    group.addTask {
                        let answer = try await daemon.respond(
                            id, apiKey: index.isMultiple(of: 2) ? first : second, decision: index % 3 == 0 ? "deny" : "approve", code: code)
                        return (answer.status, answer["status"])
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(statuses.filter { $0.0 == 200 }.count == 1)
            #expect(statuses.filter { $0.0 == 409 }.count == 49)
            let winner = try #require(statuses.first { $0.0 == 200 }?.1)
            // Every loser is told the state the winner left.
            #expect(statuses.filter { $0.0 == 409 }.allSatisfy { $0.1 == winner })
            #expect(try await daemon.status(id)["status"] == winner)
        }
    }

    @Test func fiftyConcurrentCompletionsChangeThePasswordOnce() async throws {
        try await withTestDaemon { daemon in
            let user = try await daemon.createUser(Fixture.email, password: Fixture.password)
            let (key, _) = try await daemon.login(Fixture.email, password: Fixture.password)
            let (id, code) = try await daemon.initiate(Fixture.email, newPassword: Fixture.newPassword)
            #expect(try await daemon.respond(id, apiKey: key, code: code).status == 200)
            let before = try #require(try await daemon.server.store.user(id: user.id)?.passwordHash)

            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<50 { group.addTask { try await daemon.complete(id).status } }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(statuses.filter { $0 == 200 }.count == 1)
            #expect(statuses.filter { $0 == 409 }.count == 49)
            let after = try #require(try await daemon.server.store.user(id: user.id)?.passwordHash)
            #expect(after != before)
            #expect(try await daemon.hasher.verify(Fixture.newPassword, hash: after))
            let stored = try #require(try await daemon.server.store.request(id: id))
            #expect(stored.state == .completed)
            #expect(stored.newPasswordHash == nil)
        }
    }

    @Test func longPollReturnsWhenADeviceAnswers() async throws {
        try await withTestDaemon(.socket) { daemon in
            try await daemon.createUser(Fixture.email, password: Fixture.password)
            let (key, _) = try await daemon.login(Fixture.email, password: Fixture.password)
            let (id, code) = try await daemon.initiate(Fixture.email, newPassword: Fixture.newPassword)
            // Held to its end (30 s) it would answer "pending": "approved" is the wake-up. The
            // client's own limit is only a hang detector, far past the hold, so that a busy
            // machine's slow answer on the phone's side is not taken for a missed wake-up.
            async let poll = daemon.status(id, wait: 30, timeout: .seconds(120))
            try await daemon.waitForLongPolls(1)
            #expect(try await daemon.respond(id, apiKey: key, code: code).status == 200)
            let answer = try await poll
            #expect(answer.status == 200)
            #expect(answer["status"] == "approved")
        }
    }

    /// `wait` on a request that is no longer pending answers at once with its
    /// state: a live one (approved) and a finished one (completed, read from the database).
    @Test(arguments: [Transport.router, .socket]) func aLongPollOnARequestThatIsNotPendingAnswersAtOnce(transport: Transport) async throws {
        try await withTestDaemon(transport) { daemon in
            try await daemon.createUser(Fixture.email, password: Fixture.password)
            let (key, _) = try await daemon.login(Fixture.email, password: Fixture.password)
            let (id, code) = try await daemon.initiate(Fixture.email, newPassword: Fixture.newPassword)
            #expect(try await daemon.respond(id, apiKey: key, code: code).status == 200)
            for expected in ["approved", "completed"] {
                if expected == "completed" { #expect(try await daemon.complete(id).status == 200) }
                // Held, it would take 30 s; the client gives up after 25.
                let answer = try await daemon.status(id, wait: 30, timeout: .seconds(25))
                #expect(answer.status == 200)
                #expect(answer["status"] == expected)
                #expect(answer["requestId"] == id)
                #expect(answer.json.keys.contains("errorMessage") && answer["errorMessage"] == nil, "present, null")
                #expect(answer.headers.first(name: "Content-Type")?.hasPrefix("application/json") == true)
            }
        }
    }

    @Test(arguments: [Transport.router, .socket]) func longPollTimesOutWithThePendingState(transport: Transport) async throws {
        try await withTestDaemon(transport) { daemon in
            let (id, _) = try await daemon.initiate(Fixture.email, newPassword: Fixture.newPassword)
            // Nothing answers it: it ends with the state it had. (That a poll is held at all is
            // seen through countersign_long_polls_waiting by the tests that wake one; a one-second
            // hold is too short to be caught reliably on a busy machine.)
            let answer = try await daemon.status(id, wait: 1)
            #expect(answer.status == 200)
            #expect(answer["status"] == "pending")
        }
    }

    @Test(arguments: [Transport.router, .socket]) func aRequestThatExpiresWakesItsLongPoll(transport: Transport) async throws {
        let clock = ManualClock()
        try await withTestDaemon(transport, clock: clock) { daemon in
            try await daemon.createUser(Fixture.email, password: Fixture.password)
            let (id, _) = try await daemon.initiate(Fixture.email, newPassword: Fixture.newPassword)
            async let poll = daemon.status(id, wait: 30, timeout: .seconds(25))
            try await daemon.waitForLongPolls(1)
            // Its 60 s pass on the daemon's clock; the sweeper expires it and wakes the poll.
            clock.advance(60.1)
            let answer = try await poll
            #expect(answer["status"] == "expired")
            #expect(answer["errorMessage"] != nil)
            // Written to the database by the sweeper, not only computed on read.
            let stored = try await daemon.server.store.request(id: id)
            #expect(stored?.state == .expired)
            #expect(stored?.newPasswordHash == nil)
        }
    }
}

import AsyncHTTPClient
import CountersignCore
import CountersignPush
import FakeFCM
import Foundation
import Logging
import NIOCore
import TestSupport
import Testing

/// A server may answer completely and then reset the stream with
/// `RST_STREAM(NO_ERROR)` (RFC 9113 §8.1); every such push is delivered.
@Suite struct EarlyAnswerTests {
    /// Runs `body` while `server` serves, with a CA file holding its
    /// certificate and a service account whose token endpoint is the server.
    static func serve(
        _ server: EarlyAnswerServer, _ body: (_ base: String, _ caFile: String, _ account: ServiceAccount) async throws -> Void
    ) async throws {
        let folder = try makeTemporaryFolder("early-answer")
        defer { try? FileManager.default.removeItem(at: folder) }
        let caFile = folder.appendingPathComponent("ca.pem").path
        try server.certificatePEM.write(toFile: caFile, atomically: true, encoding: .utf8)
        let keys = try await FakeFCM()
        try await server.serve { base in
            try await body(base, caFile, try ServiceAccount.parse(try keys.serviceAccountJSON(base: base), source: "early-answer"))
        }
    }

    @Test(.timeLimit(.minutes(3)), arguments: FakeFCMHarness.Transport.allCases)
    func aCompleteAnswerFollowedByAResetIsDeliveredAtFullRate(transport: FakeFCMHarness.Transport) async throws {
        let server = try EarlyAnswerServer()
        let logger = Logger(label: "early-answer-test")
        try await Self.serve(server) { base, caFile, account in
            let client = try PushSetup.patientClient(caFile: caFile)
            do {
                let tokens = try await AccessTokenProvider(account: account, client: client, logger: logger, exchangeTimeout: hangDetector)
                var configuration = FCMSender.Configuration(endpoint: base)
                // One try each: a stalled connection shows as a failed send. The
                // wait is a hang detector, not a speed: on a busy machine a send
                // queued behind 63 others took more than 5 s.
                configuration.maxAttempts = 1
                configuration.requestTimeout = 60
                // `client`: AsyncHTTPClient; `frames`: HTTP2PushClient, as the daemon sends to FCM.
                let streams = transport == .frames ? try HTTP2PushClient(endpoint: base, caFile: caFile, connectTimeout: hangDetector) : nil
                configuration.streams = streams
                let sender = FCMSender(account: account, tokens: tokens, client: client, configuration: configuration, deadTokens: nil)
                // Well past swift-nio-http2's 200 resets per connection and 30 s, many in flight at once.
                let total = 600
                let outcomes = await withTaskGroup(of: PushOutcome.self) { group in
                    var outcomes: [PushOutcome] = []
                    for index in 0..<total {
                        if index >= 64, let outcome = await group.next() { outcomes.append(outcome) }
                        group.addTask {
                            await sender.send(FakeFCMHarness.prompt(), to: FakeFCMHarness.device("token-\(index)"), logger: logger)
                        }
                    }
                    for await outcome in group { outcomes.append(outcome) }
                    return outcomes
                }
                #expect(outcomes.count == total)
                #expect(outcomes.filter { $0 == .sent }.count == total)
                #expect(server.goAways == 0, "the client took the resets for an attack")
                // The server counts a reset once its answer's write has completed, which may come after the
                // client has read that answer: wait for the count (the bound is a hang detector).
                let clock = ContinuousClock()
                let waited = clock.now
                while server.resets < total, clock.now - waited < .seconds(30) { try await Task.sleep(for: .milliseconds(10)) }
                #expect(server.resets >= total, "every answer was followed by a reset")
                #expect(sender.health == .ok)
                await streams?.shutdown()
                try await client.shutdown()
            } catch {
                try? await client.shutdown()
                throw error
            }
        }
    }

    /// AsyncHTTPClient keeps one HTTP/2 connection per host and queues what
    /// the server's stream limit leaves no room for; the sender opens another
    /// connection once its sends in flight fill the limit.
    @Test(.timeLimit(.minutes(3))) func sendsBeyondTheServersStreamLimitGoOutOnMoreConnections() async throws {
        let limit = 4
        let server = try EarlyAnswerServer(maxConcurrentStreams: limit, answerDelay: .milliseconds(200))
        let logger = Logger(label: "stream-limit-test")
        try await Self.serve(server) { base, caFile, account in
            let client = try PushSetup.patientClient(caFile: caFile)
            let tokens = try await AccessTokenProvider(account: account, client: client, logger: logger, exchangeTimeout: hangDetector)
            var configuration = FCMSender.Configuration(endpoint: base)
            configuration.maxAttempts = 1
            // A hang detector: a send queued on a busy machine is late, not lost.
            configuration.requestTimeout = 60
            configuration.sendsPerConnection = limit
            configuration.maximumConnections = 3
            configuration.openConnection = { try PushSetup.patientClient(caFile: caFile) }
            let sender = FCMSender(account: account, tokens: tokens, client: client, configuration: configuration, deadTokens: nil)
            let total = 24
            let outcomes = await withTaskGroup(of: PushOutcome.self) { group in
                for index in 0..<total {
                    group.addTask { await sender.send(FakeFCMHarness.prompt(), to: FakeFCMHarness.device("token-\(index)"), logger: logger) }
                }
                return await group.reduce(into: []) { $0.append($1) }
            }
            // All sent at once, after the token exchange gave the first client
            // its connection: the first `limit` fill that connection, the next
            // opens a second and is its only send until answered, and the rest
            // queue on the first; none opens a third meanwhile.
            #expect(outcomes.filter { $0 == .sent }.count == total, "\(outcomes)")
            #expect(sender.connectionCount == 2)
            #expect(server.connections == 2)

            // Once the second has answered, another burst fills both, then opens the third.
            let more = await withTaskGroup(of: PushOutcome.self) { group in
                for index in 0..<total {
                    group.addTask { await sender.send(FakeFCMHarness.prompt(), to: FakeFCMHarness.device("more-\(index)"), logger: logger) }
                }
                return await group.reduce(into: []) { $0.append($1) }
            }
            try await sender.shutdownOpenedConnections()
            try await client.shutdown()
            #expect(more.filter { $0 == .sent }.count == total)
            #expect(sender.connectionCount == 3)
            #expect(server.connections == 3)
        }
    }
}

import ArgumentParser
import AsyncHTTPClient
import CountersignCore
import CountersignPush
import FakeFCM
import Foundation
import Hummingbird
import HummingbirdHTTP2
import Logging
import NIOCore
import NIOHTTP1
import NIOSSL

@main
struct PushBenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "countersign-push-bench", subcommands: [PushBench.self, ClientComparison.self, SealCost.self], defaultSubcommand: PushBench.self)
}

/// Pushes N messages through ``FCMSender`` to a local fake FCM over HTTP/2 and
/// TLS, and prints the throughput and the number of token exchanges.
/// A measurement, not a test: run it through `benchmarks/push-throughput.sh`.
struct PushBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "sender", abstract: "N pushes through FCMSender to a fake FCM.")

    @Option(help: "Messages to send.") var messages = 5000
    @Option(help: "Sends in flight at once.") var concurrency = 100
    @Option(help: "Server certificate (PEM) for 127.0.0.1.") var cert: String
    @Option(help: "Server key (PEM).") var key: String
    @Option(help: "CA that signed the certificate (PEM), trusted by the sender as --fcm-ca-file would be.") var ca: String

    func run() async throws {
        let logger = {
            var logger = Logger(label: "push-bench")
            logger.logLevel = .warning
            return logger
        }()
        let fake = try await FakeFCM()
        var tls = TLSConfiguration.makeServerConfiguration(
            certificateChain: try NIOSSLCertificate.fromPEMFile(cert).map { .certificate($0) },
            privateKey: .privateKey(try NIOSSLPrivateKey(file: key, format: .pem))
        )
        tls.applicationProtocols = ["h2", "http/1.1"]
        try await fake.serve(tls: tls) { base in
            let account = try ServiceAccount.parse(try fake.serviceAccountJSON(base: base), source: "bench")
            let client = try PushSetup.makeClient(caFile: ca)

            // Which protocol the shared client speaks to the fake.
            var probe = HTTPClientRequest(url: base + "/token")
            probe.method = .GET
            let probeResponse = try await client.execute(probe, timeout: .seconds(10))
            _ = try await probeResponse.body.collect(upTo: 1 << 16)

            let tokens = try await AccessTokenProvider(account: account, client: client, logger: logger)
            let sender = FCMSender(account: account, tokens: tokens, client: client, configuration: .init(endpoint: base), deadTokens: nil)
            let clock = ContinuousClock()
            let started = clock.now
            var outcomes: [PushOutcome: Int] = [:]
            await withTaskGroup(of: PushOutcome.self) { sends in
                for index in 0..<messages {
                    if index >= concurrency, let outcome = await sends.next() {
                        outcomes[outcome, default: 0] += 1
                    }
                    sends.addTask {
                        let job = PushJob.resolved(requestID: "bench-\(index)", userID: "bench", status: .approved)
                        let device = Device(
                            id: "d\(index)", userID: "bench", name: "bench", platform: "iOS", push: .fcm("bench-token-\(index)"),
                            pushEnabled: true, createdAt: Date())
                        return await sender.send(job, to: device, logger: logger)
                    }
                }
                for await outcome in sends {
                    outcomes[outcome, default: 0] += 1
                }
            }
            let elapsed = clock.now - started
            let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
            print("protocol: \(probeResponse.version) over TLS to 127.0.0.1 (fake FCM verifying every message)")
            print("messages: \(messages), concurrency: \(concurrency)")
            print("outcomes: \(outcomes.map { "\($0.key.rawValue)=\($0.value)" }.sorted().joined(separator: " "))")
            print("fake FCM accepted: \(fake.delivered), rejected as malformed: \(fake.rejections.count)")
            print(String(format: "elapsed: %.2f s, throughput: %.0f messages/s", seconds, Double(messages) / seconds))
            print("token exchanges: \(fake.exchanges)")
            try await client.shutdown()
        }
    }
}

import AsyncHTTPClient
import CountersignCore
import CountersignPush
import FakeFCM
import Foundation
import Hummingbird
import Logging
import ServiceLifecycle
import Synchronization

/// Runs a ``FakeFCM`` on 127.0.0.1 and an ``FCMSender`` pointed at it.
struct FakeFCMHarness {
    let fake: FakeFCM
    let base: String
    let sender: FCMSender
    let tokens: AccessTokenProvider
    let deadTokens: DeadTokens

    final class DeadTokens: Sendable {
        private let list = Mutex<[String]>([])
        var tokens: [String] { list.withLock { $0 } }
        func add(_ token: String) { list.withLock { $0.append(token) } }
    }

    static func run<T: Sendable>(
        configure: (inout FCMSender.Configuration) -> Void = { _ in },
        _ body: @Sendable (FakeFCMHarness) async throws -> T
    ) async throws -> T {
        let fake = try await FakeFCM()
        let logger = Logger(label: "fake-fcm-test")
        let (ports, continuation) = AsyncStream.makeStream(of: Int.self)
        let app = Application(
            router: fake.router(),
            configuration: .init(address: .hostname("127.0.0.1", port: 0)),
            onServerRunning: { continuation.yield($0.localAddress?.port ?? 0) },
            logger: logger
        )
        let group = ServiceGroup(configuration: .init(services: [app], logger: logger))
        return try await withThrowingTaskGroup(of: T?.self) { tasks in
            tasks.addTask {
                try await group.run()
                return nil
            }
            var iterator = ports.makeAsyncIterator()
            guard let port = await iterator.next() else { throw HarnessError.notStarted }
            let base = "http://127.0.0.1:\(port)"
            let account = try ServiceAccount.parse(try fake.serviceAccountJSON(base: base), source: "fake")
            let client = try PushSetup.makeClient(caFile: nil)
            let dead = DeadTokens()
            let result: Result<T, any Error>
            do {
                let tokens = try await AccessTokenProvider(account: account, client: client, logger: logger)
                var configuration = FCMSender.Configuration(endpoint: base)
                configure(&configuration)
                let sender = FCMSender(account: account, tokens: tokens, client: client, configuration: configuration) { _, token, _ in
                    dead.add(token)
                }
                result = .success(try await body(FakeFCMHarness(fake: fake, base: base, sender: sender, tokens: tokens, deadTokens: dead)))
            } catch {
                result = .failure(error)
            }
            try await client.shutdown()
            await group.triggerGracefulShutdown()
            return try result.get()
        }
    }

    enum HarnessError: Error { case notStarted }

    static func device(_ token: String) -> Device {
        Device(id: "device-\(token)", userID: "user-1", name: "Phone", platform: "iOS", fcmToken: token, pushEnabled: true, createdAt: Date())
    }

    static func prompt(id: String = "req-AAAAAAAAAAAAAAAAAAAA", expiresIn: TimeInterval = 60) -> PushJob {
        .prompt(
            requestID: id, userID: "user-1", action: .passwordReset, expiresAt: Date().addingTimeInterval(expiresIn),
            requester: RequesterInfo(ip: "203.0.113.7", userAgent: "PhotoSync/2.3 iOS/18.1"))
    }
}

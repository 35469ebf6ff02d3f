import FakeFCM
import Foundation
import Hummingbird
import Logging
import ServiceLifecycle

/// A ``FakeFCM`` served on 127.0.0.1 for the duration of `body`, with a service-account file for it.
enum FakeFCMServer {
    static func run<T: Sendable>(
        folder: TemporaryFolder,
        _ body: @Sendable (FakeFCM, _ base: String, _ serviceAccountFile: String) async throws -> T
    ) async throws -> T {
        let fake = try await FakeFCM()
        let logger = Logger(label: "fake-fcm")
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
            guard let port = await iterator.next() else { throw TestFailure("fake FCM did not start") }
            let base = "http://127.0.0.1:\(port)"
            let file = folder.url.appendingPathComponent("fcm-service-account.json").path
            try fake.serviceAccountJSON(base: base).write(to: URL(fileURLWithPath: file))
            let result: Result<T, any Error>
            do {
                result = .success(try await body(fake, base, file))
            } catch {
                result = .failure(error)
            }
            await group.triggerGracefulShutdown()
            return try result.get()
        }
    }
}

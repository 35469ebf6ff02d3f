import Hummingbird
import HummingbirdHTTP2
import Logging
import NIOSSL
import ServiceLifecycle

extension FakeFCM {
    /// Serves the fake on 127.0.0.1 (an ephemeral port) while `body` runs, then
    /// shuts it down. With `tls`, it speaks HTTP/2 (or HTTP/1.1) over TLS.
    public func serve<T: Sendable>(
        tls: TLSConfiguration? = nil,
        _ body: @Sendable (_ base: String) async throws -> T
    ) async throws -> T {
        var logger = Logger(label: "fake-fcm")
        logger.logLevel = .warning
        let (ports, continuation) = AsyncStream.makeStream(of: Int.self)
        let app = Application(
            router: router(),
            server: try tls.map { try .http2Upgrade(tlsConfiguration: $0) } ?? .http1(),
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
            guard let port = await iterator.next() else { throw FakeFCMError.notStarted }
            let result: Result<T, any Error>
            do {
                result = .success(try await body("http\(tls == nil ? "" : "s")://127.0.0.1:\(port)"))
            } catch {
                result = .failure(error)
            }
            await group.triggerGracefulShutdown()
            return try result.get()
        }
    }
}

public enum FakeFCMError: Error {
    case notStarted
}

import AsyncHTTPClient
import NIOCore
import ServiceLifecycle
import Synchronization

/// The HTTP client of every webhook, made at the first delivery (a daemon
/// whose integrations have no webhook never opens one) and shut down with the
/// service group: HTTP/2 where the receiver offers it, no redirect followed.
public final class WebhookClient: Service, Sendable {
    private let made = Mutex<HTTPClient?>(nil)

    public init() {}

    func client() -> HTTPClient {
        made.withLock { made in
            if let client = made { return client }
            var configuration = HTTPClient.Configuration()
            configuration.httpVersion = .automatic
            configuration.redirectConfiguration = .disallow
            configuration.timeout = .init(connect: .seconds(10), read: .seconds(10))
            // A refused connection fails the attempt at once: the outbox retries with its own
            // back-off, and `webhook list` shows why instead of an attempt that hangs for 10 s.
            configuration.connectionPool.retryConnectionEstablishment = false
            let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
            made = client
            return client
        }
    }

    public func run() async throws {
        try? await gracefulShutdown()
        try await made.withLock { made in
            defer { made = nil }
            return made
        }?.shutdown()
    }
}

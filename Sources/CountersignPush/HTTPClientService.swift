import AsyncHTTPClient
import ServiceLifecycle

/// The HTTP client that push uses, shut down cleanly with the service group.
public struct HTTPClientService: Service {
    public let client: HTTPClient

    public init(client: HTTPClient) {
        self.client = client
    }

    public func run() async throws {
        try? await gracefulShutdown()
        try await client.shutdown()
    }
}

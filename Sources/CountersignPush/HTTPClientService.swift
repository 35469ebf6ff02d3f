import AsyncHTTPClient
import ServiceLifecycle

/// The HTTP clients that push uses, shut down cleanly with the service group.
public struct HTTPClientService: Service {
    public let client: HTTPClient
    let sender: FCMSender?

    public init(client: HTTPClient, sender: FCMSender? = nil) {
        self.client = client
        self.sender = sender
    }

    public func run() async throws {
        try? await gracefulShutdown()
        var failure: (any Error)?
        do { try await sender?.shutdownOpenedConnections() } catch { failure = error }
        try await client.shutdown()
        if let failure { throw failure }
    }
}

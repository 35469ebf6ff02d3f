import AsyncHTTPClient
import CountersignOutbound
import ServiceLifecycle

/// The HTTP clients that push uses, shut down cleanly with the service group.
public struct HTTPClientService: Service {
    private let closeClients: @Sendable () async throws -> Void
    let sender: FCMSender?

    public init(client: HTTPClient, sender: FCMSender? = nil) {
        self.closeClients = { try await client.shutdown() }
        self.sender = sender
    }

    /// The clients of URLs devices chose (Web Push), each pinned to its checked address.
    public init(checked: CheckedHTTPClients) {
        self.closeClients = { await checked.shutdown() }
        self.sender = nil
    }

    /// Shuts the clients down now (a setup that failed half-way).
    public func shutdown() async throws { try await closeClients() }

    public func run() async throws {
        try? await gracefulShutdown()
        var failure: (any Error)?
        do { try await sender?.shutdownOpenedConnections() } catch { failure = error }
        try await closeClients()
        if let failure { throw failure }
    }
}

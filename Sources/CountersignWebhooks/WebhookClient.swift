import AsyncHTTPClient
import CountersignCore
import CountersignOutbound
import Foundation
import NIOCore
import ServiceLifecycle

/// The HTTP clients of webhooks, one per receiver host, made at a host's first
/// delivery (a daemon whose integrations have no webhook never opens one) and
/// shut down with the service group: HTTP/2 where the receiver offers it, no
/// redirect followed. Each host is resolved once per client and connected to
/// where it was checked (``CheckedHTTPClients``): `http://` only to a loopback
/// address, so a name that answers loopback first and another address later
/// cannot carry an unencrypted event away. A URL a relying service set itself
/// (``Integration/webhookPublicOnly``) goes through clients of its own that
/// connect over https to public addresses only: its key cannot point the
/// daemon at a host of the deployment's network.
public final class WebhookClient: Service, Sendable {
    private let clients: CheckedHTTPClients
    private let publicClients: CheckedHTTPClients

    public init(resolver: any HostResolver = SystemResolver()) {
        clients = CheckedHTTPClients(
            resolver: resolver, allows: { scheme, address in scheme == "https" || Self.isLoopback(address) }, makeClient: Self.makeClient)
        publicClients = CheckedHTTPClients(
            resolver: resolver, allows: { scheme, address in scheme == "https" && PushEndpointPolicy.isPublic(address) },
            makeClient: Self.makeClient)
    }

    @Sendable static func makeClient(dnsOverride: [String: String]) -> HTTPClient {
        var configuration = HTTPClient.Configuration()
        configuration.httpVersion = .automatic
        configuration.redirectConfiguration = .disallow
        configuration.timeout = .init(connect: .seconds(10), read: .seconds(10))
        // A refused connection fails the attempt at once: the outbox retries with its own
        // back-off, and `webhook list` shows why instead of an attempt that hangs for 10 s.
        configuration.connectionPool.retryConnectionEstablishment = false
        configuration.dnsOverride = dnsOverride
        return HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
    }

    func client(for url: URL, publicOnly: Bool = false) async throws -> HTTPClient {
        try await (publicOnly ? publicClients : clients).client(for: url)
    }

    /// 127.0.0.0/8 or ::1.
    static func isLoopback(_ address: [UInt8]) -> Bool {
        address.count == 4 ? address[0] == 127 : address == [UInt8](repeating: 0, count: 15) + [1]
    }

    public func run() async throws {
        try? await gracefulShutdown()
        await shutdown()
    }

    func shutdown() async {
        await clients.shutdown()
        await publicClients.shutdown()
    }
}

import CountersignOutbound
import Foundation
import Testing

@testable import CountersignWebhooks

/// trust.md: webhook URLs are connected to where they were checked, as Web
/// Push endpoints are: an `http://` webhook only to a loopback address, every
/// address of the name checked, through the resolver seam production uses.
@Suite struct WebhookConnectionTests {
    struct Answers: HostResolver {
        let addresses: [[UInt8]]
        func addresses(of host: String) async throws -> [[UInt8]] { addresses }
    }

    @Test func anHTTPWebhookConnectsOnlyToALoopbackAddress() async throws {
        let url = try #require(URL(string: "http://hooks.test:9000/hook"))
        let loopback = WebhookClient(resolver: Answers(addresses: [[127, 0, 0, 1]]))
        _ = try await loopback.client(for: url)
        // A name that answers loopback and a private address: refused whole, before any connection.
        let mixed = WebhookClient(resolver: Answers(addresses: [[127, 0, 0, 1], [10, 1, 2, 3]]))
        await #expect(throws: CheckedHTTPClients.Refusal.forbidden([10, 1, 2, 3])) { try await mixed.client(for: url) }
        let elsewhere = WebhookClient(resolver: Answers(addresses: [[192, 0, 2, 1]]))
        await #expect(throws: CheckedHTTPClients.Refusal.forbidden([192, 0, 2, 1])) { try await elsewhere.client(for: url) }
        // https:// may go to any address the operator's receiver has.
        _ = try await elsewhere.client(for: try #require(URL(string: "https://hooks.test/hook")))
        for client in [loopback, mixed, elsewhere] { await client.shutdown() }
    }

    /// A URL a relying service set itself goes over https to public addresses only: a name that
    /// answers with a loopback, private, link-local or metadata address is refused before any
    /// connection, whatever the URL says; the operator's URL to the same name is not.
    @Test func aURLTheRelyingServiceSetReachesPublicAddressesOnly() async throws {
        let url = try #require(URL(string: "https://hooks.test/hook"))
        for address: [UInt8] in [[127, 0, 0, 1], [10, 1, 2, 3], [169, 254, 169, 254], [192, 168, 1, 1]] {
            let client = WebhookClient(resolver: Answers(addresses: [address]))
            await #expect(throws: CheckedHTTPClients.Refusal.forbidden(address)) { try await client.client(for: url, publicOnly: true) }
            _ = try await client.client(for: url, publicOnly: false)
            await client.shutdown()
        }
        let publicHost = WebhookClient(resolver: Answers(addresses: [[93, 184, 216, 34]]))
        _ = try await publicHost.client(for: url, publicOnly: true)
        // Plain http, even to a public address, is not for it.
        await #expect(throws: CheckedHTTPClients.Refusal.forbidden([93, 184, 216, 34])) {
            try await publicHost.client(for: try #require(URL(string: "http://hooks.test/hook")), publicOnly: true)
        }
        await publicHost.shutdown()
    }
}

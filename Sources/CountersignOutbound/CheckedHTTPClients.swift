import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import Synchronization

/// HTTP clients for URLs someone else chose (a device's Web Push endpoint, a
/// relying service's webhook): the host is resolved once, every address it
/// got is checked, and the connection goes to a checked address. The TLS
/// server name, the certificate check and `Host` stay the host name
/// (AsyncHTTPClient's `dnsOverride`). A resolver that answers differently the
/// next time changes nothing: the client connects where it was checked, and a
/// new resolution is checked again before a new client uses it.
///
/// One client per host, kept for ``reuse`` (then resolved and checked again);
/// at most ``maxClients`` at once, the oldest retired first. A retired client
/// is shut down once requests made on it have had their time.
public final class CheckedHTTPClients: Sendable {
    /// Why a host cannot be connected to.
    public enum Refusal: Error, Equatable, CustomStringConvertible {
        /// It resolved to nothing.
        case noAddress
        /// It resolved to an address the check refuses (4 or 16 bytes).
        case forbidden([UInt8])

        public var description: String {
            switch self {
            case .noAddress: "no address for the host"
            case .forbidden(let address): "the host resolves to \(CheckedHTTPClients.text(of: address)), which is not allowed"
            }
        }
    }

    let resolver: any HostResolver
    /// Whether a URL of this scheme may connect to this address.
    let allows: @Sendable (_ scheme: String, _ address: [UInt8]) -> Bool
    let makeClient: @Sendable (_ dnsOverride: [String: String]) -> HTTPClient
    let reuse: Duration
    let maxClients: Int
    /// How long a retired client lives on for the requests made on it.
    let retireAfter: Duration
    let now: @Sendable () -> ContinuousClock.Instant

    private struct Entry {
        var client: HTTPClient
        var madeAt: ContinuousClock.Instant
    }
    private let clients = Mutex<[String: Entry]>([:])
    private let retiring = Mutex<[HTTPClient]>([])

    public init(
        resolver: any HostResolver = SystemResolver(), reuse: Duration = .seconds(60), maxClients: Int = 64, retireAfter: Duration = .seconds(30),
        allows: @escaping @Sendable (_ scheme: String, _ address: [UInt8]) -> Bool,
        makeClient: @escaping @Sendable (_ dnsOverride: [String: String]) -> HTTPClient,
        now: @escaping @Sendable () -> ContinuousClock.Instant = { ContinuousClock.now }
    ) {
        self.resolver = resolver
        self.reuse = reuse
        self.maxClients = maxClients
        self.retireAfter = retireAfter
        self.allows = allows
        self.makeClient = makeClient
        self.now = now
    }

    /// The client for `url`'s host, connecting to an address checked when it was made;
    /// throws ``Refusal`` when the host resolves to nothing or to any address not allowed.
    public func client(for url: URL) async throws -> HTTPClient {
        guard let scheme = url.scheme?.lowercased(), let host = url.host, !host.isEmpty else { throw Refusal.noAddress }
        let key = scheme + "://" + host
        let at = now()
        if let entry = clients.withLock({ $0[key] }), at - entry.madeAt < reuse { return entry.client }
        let bare = host.trimmingCharacters(in: CharacterSet(charactersIn: "[]"))
        let addresses = try await resolver.addresses(of: bare)
        guard let first = addresses.first else { throw Refusal.noAddress }
        // Every address is checked, not only the one used: a name that answers with a
        // private address among public ones is refused whole.
        if let forbidden = addresses.first(where: { !allows(scheme, $0) }) { throw Refusal.forbidden(forbidden) }
        let literal = Self.literal(bare) != nil
        let client = makeClient(literal ? [:] : [host: Self.text(of: first)])
        var retired: [HTTPClient] = []
        clients.withLock { clients in
            if let old = clients[key] { retired.append(old.client) }
            clients[key] = Entry(client: client, madeAt: at)
            while clients.count > maxClients, let oldest = clients.min(by: { $0.value.madeAt < $1.value.madeAt }) {
                retired.append(oldest.value.client)
                clients[oldest.key] = nil
            }
        }
        for old in retired { retire(old) }
        return client
    }

    /// Shuts a replaced client down once the requests made on it have had their time.
    private func retire(_ client: HTTPClient) {
        retiring.withLock { $0.append(client) }
        let delay = retireAfter
        Task { [weak self] in
            try? await Task.sleep(for: delay)
            guard let self, self.retiring.withLock({ list in list.firstIndex { $0 === client }.map { list.remove(at: $0) } }) != nil else { return }
            try? await client.shutdown()
        }
    }

    /// Shuts every client down (the service group is stopping).
    public func shutdown() async {
        let all =
            clients.withLock { clients in
                defer { clients = [:] }
                return clients.values.map(\.client)
            }
            + retiring.withLock { list in
                defer { list = [] }
                return list
            }
        for client in all { try? await client.shutdown() }
    }

    /// 4 or 16 bytes if `host` is an IP address literal.
    static func literal(_ host: String) -> [UInt8]? {
        var v4 = in_addr()
        if inet_pton(AF_INET, host, &v4) == 1 { return withUnsafeBytes(of: &v4) { Array($0) } }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, host, &v6) == 1 { return withUnsafeBytes(of: &v6) { Array($0) } }
        return nil
    }

    /// An address as text (`203.0.113.7`, `2001:db8::1`).
    public static func text(of address: [UInt8]) -> String {
        var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        let family = address.count == 4 ? AF_INET : AF_INET6
        let written = address.withUnsafeBytes { inet_ntop(family, $0.baseAddress, &buffer, socklen_t(buffer.count)) }
        return written == nil ? "?" : String(cString: buffer)
    }
}

import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Which Web Push endpoints the daemon posts to. A device chooses its endpoint,
/// so an endpoint is a URL an account holder makes the daemon call: only
/// `https://` to a public address, never loopback, private, link-local,
/// shared or metadata addresses (checked when a device sends it, and again on
/// the addresses its host resolves to before each send).
/// `--push-allow-private-endpoints` lifts the address check and allows
/// `http://` too, for tests and closed networks.
public struct PushEndpointPolicy: Sendable, Equatable {
    public var allowsPrivate: Bool

    public init(allowsPrivate: Bool = false) {
        self.allowsPrivate = allowsPrivate
    }

    /// Why `endpoint` cannot be a Web Push endpoint, or `nil` when it can.
    public func problem(_ endpoint: String) -> String? {
        guard endpoint.utf8.count <= 2048, let url = URL(string: endpoint), let scheme = url.scheme?.lowercased(), let host = url.host,
            !host.isEmpty
        else {
            return "must be an absolute https:// URL"
        }
        if url.user != nil || url.password != nil { return "must not carry a user or password" }
        guard scheme == "https" || (scheme == "http" && allowsPrivate) else { return "must be an https:// URL" }
        if allowsPrivate { return nil }
        let bare = host.trimmingCharacters(in: CharacterSet(charactersIn: "[]")).lowercased()
        if let bytes = IPNetwork.address(bare) ?? Self.looseIPv4(bare) {
            return Self.isPublic(bytes) ? nil : "must not name a loopback, private, link-local or metadata address"
        }
        let name = bare.hasSuffix(".") ? String(bare.dropLast()) : bare
        if Self.blockedNames.contains(name) || name.hasSuffix(".localhost") || name.hasSuffix(".internal") || !name.contains(".") {
            return "must name a public host"
        }
        return nil
    }

    /// Whether the daemon may connect to `address` (4 or 16 bytes) for a push.
    public func allows(address: [UInt8]) -> Bool {
        allowsPrivate || Self.isPublic(address)
    }

    /// An IPv4 address in a form the C resolver also reads (`2130706433`,
    /// `0x7f.1`, `127.1`): a name made of such parts is an address, not a name.
    static func looseIPv4(_ host: String) -> [UInt8]? {
        guard !host.isEmpty,
            host.utf8.allSatisfy({
                ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x2E || $0 == 0x78 || $0 == 0x58 || ($0 >= 0x61 && $0 <= 0x66) || ($0 >= 0x41 && $0 <= 0x46)
            })
        else { return nil }
        var address = in_addr()
        guard inet_aton(host, &address) != 0 else { return nil }
        return withUnsafeBytes(of: &address) { Array($0) }
    }

    static let blockedNames: Set<String> = ["localhost", "metadata.google.internal", "metadata"]

    /// Loopback, private, shared (CGNAT), link-local (cloud metadata lives at
    /// 169.254.169.254 and fd00:ec2::254), multicast, reserved and
    /// documentation ranges, and IPv6 forms that embed an IPv4 address.
    static let nonPublic: [IPNetwork] = [
        "0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12", "192.0.0.0/24", "192.0.2.0/24",
        "192.168.0.0/16", "198.18.0.0/15", "198.51.100.0/24", "203.0.113.0/24", "224.0.0.0/4", "240.0.0.0/4",
        "::/128", "::1/128", "::/96", "::ffff:0:0:0/96", "64:ff9b::/96", "64:ff9b:1::/48", "100::/64", "2001::/32", "2001:db8::/32", "2002::/16",
        "fc00::/7",
        "fe80::/10",
        "fec0::/10", "ff00::/8",
    ].map { IPNetwork($0)! }

    public static func isPublic(_ address: [UInt8]) -> Bool {
        !nonPublic.contains { $0.contains(address) }
    }
}

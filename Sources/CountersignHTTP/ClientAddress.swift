#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// An IP network in CIDR form (`10.0.0.0/8`, `2001:db8::/32`, or one address).
public struct IPNetwork: Sendable, Equatable, CustomStringConvertible {
    let bytes: [UInt8]
    let prefixLength: Int
    public let description: String

    public init?(_ text: String) {
        let parts = text.split(separator: "/", maxSplits: 1).map(String.init)
        guard let first = parts.first, let bytes = Self.address(first) else { return nil }
        let bits = bytes.count * 8
        var prefix = bits
        if parts.count == 2 {
            guard let value = Int(parts[1]), (0...bits).contains(value) else { return nil }
            prefix = value
        }
        self.bytes = bytes
        self.prefixLength = prefix
        self.description = text
    }

    public func contains(_ address: [UInt8]) -> Bool {
        guard address.count == bytes.count else { return false }
        var remaining = prefixLength
        for (a, b) in zip(address, bytes) where remaining > 0 {
            let take = min(8, remaining)
            let mask = UInt8(truncatingIfNeeded: 0xFF << (8 - take))
            if a & mask != b & mask { return false }
            remaining -= take
        }
        return true
    }

    /// The bytes of an IPv4 or IPv6 address (IPv4-mapped IPv6 as IPv4), parsed by the C library.
    static func address(_ text: String) -> [UInt8]? {
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 {
            return withUnsafeBytes(of: &v4) { Array($0) }
        }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, text, &v6) == 1 {
            let bytes = withUnsafeBytes(of: &v6) { Array($0) }
            if bytes[0..<10].allSatisfy({ $0 == 0 }) && bytes[10] == 0xFF && bytes[11] == 0xFF {
                return Array(bytes[12...])
            }
            return bytes
        }
        return nil
    }
}

/// Which address a request comes from: the socket peer, or, when the peer is
/// a trusted proxy, the right-most address of `X-Forwarded-For` that is not
/// itself a trusted proxy.
public enum ClientAddress {
    public static func resolve(peer: String, forwardedFor: [String], trusted: [IPNetwork]) -> String {
        guard !trusted.isEmpty, isTrusted(peer, trusted) else { return peer }
        var client = peer
        let hops = forwardedFor.flatMap { $0.split(separator: ",") }.map { String($0).trimmingCharacters(in: " \t") }
        for hop in hops.reversed() {
            // Garbage is not an address: keep the last hop that was one.
            guard IPNetwork.address(hop) != nil else { break }
            client = hop
            if !isTrusted(hop, trusted) { break }
        }
        return client
    }

    static func isTrusted(_ address: String, _ trusted: [IPNetwork]) -> Bool {
        guard let bytes = IPNetwork.address(address) else { return false }
        return trusted.contains { $0.contains(bytes) }
    }
}

extension String {
    fileprivate func trimmingCharacters(in set: String) -> String {
        var scalars = Substring(self)
        while let first = scalars.first, set.contains(first) { scalars.removeFirst() }
        while let last = scalars.last, set.contains(last) { scalars.removeLast() }
        return String(scalars)
    }
}

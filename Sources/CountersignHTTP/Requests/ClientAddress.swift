import CountersignCore

/// Which address a request comes from: the socket peer, or, when the peer is
/// a trusted proxy, the right-most address of `X-Forwarded-For` that is not
/// itself a trusted proxy.
public enum ClientAddress {
    public static func resolve(peer: String, forwardedFor: [String], trusted: [IPNetwork]) -> String {
        guard !trusted.isEmpty, isTrusted(peer, trusted) else { return peer }
        var client = peer
        let hops = forwardedFor.flatMap { $0.split(separator: ",") }.map { String($0).trimmingCharacters(in: " \t") }
        for hop in hops.reversed().map(withoutPort) {
            // Garbage is not an address: keep the last hop that was one.
            guard IPNetwork.address(hop) != nil else { break }
            client = hop
            if !isTrusted(hop, trusted) { break }
        }
        return client
    }

    /// The key a per-client limit counts under: the address itself for IPv4,
    /// its /64 network for IPv6 (one subscriber usually holds a whole /64, so
    /// counting single IPv6 addresses would let one client rotate past every limit).
    public static func limitKey(_ address: String) -> String {
        guard let bytes = IPNetwork.address(address), bytes.count == 16 else { return address }
        let groups = stride(from: 0, to: 8, by: 2).map { String(UInt16(bytes[$0]) << 8 | UInt16(bytes[$0 + 1]), radix: 16) }
        return groups.joined(separator: ":") + "::/64"
    }

    /// A forwarded hop as proxies write it, without a port: `203.0.113.7:51234`
    /// → `203.0.113.7`, `[2001:db8::1]:443` → `2001:db8::1`.
    static func withoutPort(_ hop: String) -> String {
        if hop.hasPrefix("["), let close = hop.firstIndex(of: "]") {
            return String(hop[hop.index(after: hop.startIndex)..<close])
        }
        let parts = hop.split(separator: ":", omittingEmptySubsequences: false)
        if parts.count == 2, IPNetwork.address(String(parts[0])) != nil, UInt16(parts[1]) != nil {
            return String(parts[0])
        }
        return hop
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

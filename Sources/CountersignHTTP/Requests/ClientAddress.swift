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

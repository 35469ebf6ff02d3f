import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A port of 127.0.0.1 that nothing uses now, for a server a test starts later
/// (or for an address where nothing must answer).
///
/// Outside the kernel's ephemeral range (`ip_local_port_range`): a port taken
/// from that range is free again once the probe closes, and any outgoing
/// connection (the suite makes thousands) or any server bound to port 0 may
/// take it before the test's server binds it. Drawn at random from 10000 up to
/// that range (above it, where it starts lower), so that tests picking at
/// once rarely draw the same one.
public func unusedPort() -> Int {
    let (low, high) = ephemeralPorts()
    // Below the range; where the range starts too low for that, above it.
    let outside: Range<Int>? = low > 10_001 ? 10_000..<low : high < 65_000 ? (high + 1)..<65_536 : nil
    if let outside {
        for _ in 0..<200 {
            let port = Int.random(in: outside)
            if probe(port) != nil { return port }
        }
    }
    // No room outside the range: a port the system gives, as before.
    return probe(0) ?? 0
}

/// The kernel's ephemeral range (32768–60999 when it cannot be read).
private func ephemeralPorts() -> (low: Int, high: Int) {
    let text = (try? String(contentsOfFile: "/proc/sys/net/ipv4/ip_local_port_range", encoding: .utf8)) ?? ""
    let bounds = text.split(whereSeparator: \.isWhitespace).compactMap { Int($0) }
    return bounds.count == 2 ? (bounds[0], bounds[1]) : (32768, 60999)
}

/// Binds a TCP socket to 127.0.0.1:`port` and closes it: the port it got, or `nil`.
private func probe(_ port: Int) -> Int? {
    let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard descriptor >= 0 else { return nil }
    defer { close(descriptor) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = in_port_t(UInt16(port).bigEndian)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) { pointer in
        pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            bind(descriptor, $0, length) == 0 && getsockname(descriptor, $0, &length) == 0
        }
    }
    return bound ? Int(UInt16(bigEndian: address.sin_port)) : nil
}

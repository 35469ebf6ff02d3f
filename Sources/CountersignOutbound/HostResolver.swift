import Foundation
import NIOPosix

#if canImport(Glibc)
import Glibc
#endif

/// Resolves a host name to its addresses (4 or 16 bytes each; an IPv4-mapped
/// IPv6 address as the IPv4 address it carries). The seam ``CheckedHTTPClients``
/// resolves through, in production the system resolver, in tests one the test controls.
public protocol HostResolver: Sendable {
    func addresses(of host: String) async throws -> [[UInt8]]
}

/// The system resolver (`getaddrinfo`), on threads of its own: a device's name on
/// a slow DNS server holds one of these, never a thread the daemon's other work runs on.
public struct SystemResolver: HostResolver {
    public init() {}

    static let pool: NIOThreadPool = {
        let pool = NIOThreadPool(numberOfThreads: 4)
        pool.start()
        return pool
    }()

    public func addresses(of host: String) async throws -> [[UInt8]] {
        if let literal = CheckedHTTPClients.literal(host) { return [Self.unmapped(literal)] }
        return try await Self.pool.runIfActive {
            var hints = addrinfo()
            hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
            var list: UnsafeMutablePointer<addrinfo>?
            guard getaddrinfo(host, nil, &hints, &list) == 0, let first = list else { return [] }
            defer { freeaddrinfo(first) }
            var addresses: [[UInt8]] = []
            var entry: UnsafeMutablePointer<addrinfo>? = first
            while let current = entry {
                if let address = current.pointee.ai_addr {
                    switch Int32(address.pointee.sa_family) {
                    case AF_INET:
                        address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) {
                            var value = $0.pointee.sin_addr
                            addresses.append(withUnsafeBytes(of: &value) { Array($0) })
                        }
                    case AF_INET6:
                        address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) {
                            var value = $0.pointee.sin6_addr
                            addresses.append(Self.unmapped(withUnsafeBytes(of: &value) { Array($0) }))
                        }
                    default: break
                    }
                }
                entry = current.pointee.ai_next
            }
            return addresses
        }
    }

    /// An IPv4-mapped IPv6 address as the IPv4 address it carries; any other as it is.
    static func unmapped(_ bytes: [UInt8]) -> [UInt8] {
        guard bytes.count == 16, bytes[0..<10].allSatisfy({ $0 == 0 }), bytes[10] == 0xFF, bytes[11] == 0xFF else { return bytes }
        return Array(bytes[12...])
    }
}

import NIOCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Whether the daemon can listen where it is told, found out before anything
/// else happens (the database is neither opened nor migrated for a daemon that
/// cannot serve): a socket bound to each address, closed at once.
///
/// The socket is bound and never listens. A listening one (a server bootstrap
/// bound and closed) could complete a client's connection in the moment before
/// it closed, and that connection, never read nor closed, held its client for
/// good: a health check sent as the daemon started waited forever.
public enum ListenCheck {
    /// Throws one line naming the address and the reason when `address` cannot be bound
    /// (another process listens there, a name that does not resolve, an address not on this host).
    ///
    /// An address in use is tried `attempts` times, `pause` between tries: a socket held a moment by something
    /// else (`config check` binding it as a restart comes, the previous process still closing) does not stop a start
    /// for good (exit 78 is not restarted).
    public static func ensureFree(
        _ address: ListenAddress, what: String, attempts: Int = 1,
        pause: @Sendable () async -> Void = { try? await Task.sleep(for: .milliseconds(200)) }
    ) async throws {
        guard address.port > 0 else { return }  // port 0: the system picks a free one
        var reason = ""
        for attempt in 1...max(1, attempts) {
            do {
                guard let failure = try bindOnly(SocketAddress.makeAddressResolvingHost(address.host, port: address.port)) else { return }
                reason = failure.reason
                guard failure.inUse, attempt < attempts else { break }
            } catch {
                reason = "\(error)"
                break
            }
            await pause()
        }
        throw ConfigurationError("cannot listen on \(address.host):\(address.port) (\(what)): \(reason)")
    }

    /// Binds a TCP socket to `address` as the server's socket will be bound
    /// (`SO_REUSEADDR`, so that connections of an earlier run still in TIME_WAIT
    /// do not count; an IPv6 address for both families, as NIO sets it) and closes
    /// it; `nil` when the bind worked, else the system's reason and whether it was an address in use.
    static func bindOnly(_ address: SocketAddress) -> (reason: String, inUse: Bool)? {
        #if canImport(Glibc)
        let stream = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
        #else
        let stream = SOCK_STREAM
        #endif
        let descriptor = socket(address.protocol.rawValue, stream, 0)
        guard descriptor >= 0 else { return (String(cString: strerror(errno)), false) }
        defer { close(descriptor) }
        var one: Int32 = 1
        setsockopt(descriptor, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        if address.protocol == .inet6 {
            var zero: Int32 = 0
            setsockopt(descriptor, Int32(IPPROTO_IPV6), IPV6_V6ONLY, &zero, socklen_t(MemoryLayout<Int32>.size))
        }
        let bound = address.withSockAddr { pointer, length in bind(descriptor, pointer, socklen_t(length)) }
        let failure = errno
        return bound == 0 ? nil : (String(cString: strerror(failure)), failure == EADDRINUSE)
    }
}

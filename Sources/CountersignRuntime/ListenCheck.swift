import NIOCore
import NIOPosix

/// Whether the daemon can listen where it is told, found out before anything
/// else happens (the database is neither opened nor migrated for a daemon that
/// cannot serve): a bind to each address, closed at once.
public enum ListenCheck {
    /// Throws one line naming the address and the reason when `address` cannot be bound
    /// (another process listens there, a name that does not resolve, an address not on this host).
    public static func ensureFree(_ address: ListenAddress, what: String) async throws {
        guard address.port > 0 else { return }  // port 0: the system picks a free one
        do {
            let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                .bind(host: address.host, port: address.port).get()
            try await channel.close().get()
        } catch let error as IOError {
            throw ConfigurationError("cannot listen on \(address.host):\(address.port) (\(what)): \(String(cString: strerror(error.errnoCode)))")
        } catch {
            throw ConfigurationError("cannot listen on \(address.host):\(address.port) (\(what)): \(error)")
        }
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// sd_notify(3): one datagram per message to `$NOTIFY_SOCKET`, a path or an
/// abstract socket (`@name`). Absent outside systemd, where it does nothing.
public struct SystemdNotifier: Sendable {
    public let socketPath: String

    public init?(environment: [String: String]) {
        guard let path = environment["NOTIFY_SOCKET"], !path.isEmpty, path.hasPrefix("/") || path.hasPrefix("@") else {
            return nil
        }
        self.socketPath = path
    }

    /// The watchdog period the service manager expects, when it asked for one
    /// (`$WATCHDOG_USEC`, for this process if `$WATCHDOG_PID` names one).
    public static func watchdogInterval(environment: [String: String]) -> Duration? {
        guard let text = environment["WATCHDOG_USEC"], let microseconds = Int64(text), microseconds > 0 else { return nil }
        if let pid = environment["WATCHDOG_PID"], let owner = Int32(pid), owner != getpid() { return nil }
        return .microseconds(microseconds)
    }

    /// Sends `message` (e.g. `READY=1`); returns whether it was sent. Waits
    /// at most 2 s for room in the manager's queue, then drops the message:
    /// a send blocked for good would hold the daemon, shutdown included, until
    /// the manager read again; one that never waited could lose `READY=1` to
    /// a moment's backlog.
    @discardableResult
    public func send(_ message: String) -> Bool {
        let descriptor = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
        guard descriptor >= 0 else { return false }
        defer { close(descriptor) }
        var limit = timeval(tv_sec: 2, tv_usec: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_SNDTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        var pathBytes = Array(socketPath.utf8)
        if pathBytes.first == UInt8(ascii: "@") { pathBytes[0] = 0 }  // abstract namespace
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard pathBytes.count < capacity else { return false }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: pathBytes)
        }
        let length = socklen_t(MemoryLayout<sa_family_t>.size + pathBytes.count + (pathBytes.first == 0 ? 0 : 1))
        let payload = Array(message.utf8)
        let sent = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { socketAddress in
                sendto(descriptor, payload, payload.count, Int32(MSG_NOSIGNAL), socketAddress, length)
            }
        }
        return sent == payload.count
    }
}

import CountersignCore
import CountersignServices
import NIOCore
import Synchronization

/// Open connections per peer address (per /64 for IPv6), capped: a peer that
/// holds `cap` connections has its next one closed at once and counted. A
/// peer inside a trusted proxy's network is not capped (it carries many
/// clients, each still limited by the per-address limits and long-poll caps).
final class ConnectionsPerAddress: Sendable {
    let cap: Int
    let trusted: [IPNetwork]
    let metrics: AppMetrics
    private let open = Mutex<[String: Int]>([:])

    /// `cap` 0: no cap.
    init(cap: Int, trusted: [IPNetwork], metrics: AppMetrics) {
        self.cap = cap
        self.trusted = trusted
        self.metrics = metrics
    }

    /// Counts a new connection from `address`: the key to give back when it
    /// closes, or `nil` when it is refused (or not counted: no cap, a proxy).
    func admit(_ address: SocketAddress?) -> (admitted: Bool, key: String?) {
        guard cap > 0, let ip = address?.ipAddress else { return (true, nil) }
        if ClientAddress.isTrusted(ip, trusted) { return (true, nil) }
        let key = ClientAddress.limitKey(ip)
        let admitted = open.withLock { open in
            let count = open[key, default: 0]
            guard count < cap else { return false }
            open[key] = count + 1
            return true
        }
        if !admitted { metrics.connectionRefused() }
        return (admitted, admitted ? key : nil)
    }

    func release(_ key: String) {
        open.withLock { open in
            let count = (open[key] ?? 1) - 1
            open[key] = count > 0 ? count : nil
        }
    }
}

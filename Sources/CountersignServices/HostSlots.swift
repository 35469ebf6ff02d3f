import Foundation

/// Sends in flight per endpoint host within one push lane, and the sends that
/// wait for their host: a value the lane's drain owns, so every decision is
/// testable without I/O. A Web Push endpoint is a device's choice: a host that
/// never answers may hold `perHost` of the lane's slots, never more, and its
/// other sends wait for it alone (prompts before notices), bounded.
struct HostSlots<Send: Sendable>: Sendable {
    /// Sends in flight to one host.
    let perHost: Int
    /// Sends that may wait for one host before the oldest (a notice first) is dropped.
    let waitingPerHost: Int
    private var inFlight: [String: Int] = [:]
    private var prompts: [String: [Send]] = [:]
    private var notices: [String: [Send]] = [:]

    init(perHost: Int, waitingPerHost: Int = 1000) {
        self.perHost = perHost
        self.waitingPerHost = waitingPerHost
    }

    enum Admission {
        /// Start it now (it is counted against its host).
        case start
        /// It waits for its host; `dropped` made room for it, if one had to.
        case wait(dropped: Send?)
    }

    /// A send to `host` (`nil`: a provider's own host, bounded by the lane alone).
    mutating func admit(_ send: Send, host: String?, isPrompt: Bool) -> Admission {
        guard let host else { return .start }
        if inFlight[host, default: 0] < perHost {
            inFlight[host, default: 0] += 1
            return .start
        }
        var dropped: Send?
        if prompts[host, default: []].count + notices[host, default: []].count >= waitingPerHost {
            dropped = notices[host, default: []].isEmpty ? prompts[host]?.removeFirst() : notices[host]?.removeFirst()
        }
        if isPrompt { prompts[host, default: []].append(send) } else { notices[host, default: []].append(send) }
        return .wait(dropped: dropped)
    }

    /// A send to `host` ended: the next one waiting for that host, counted as started, if any.
    mutating func finished(host: String?) -> Send? {
        guard let host else { return nil }
        if let next = prompts[host]?.first {
            prompts[host]?.removeFirst()
            if prompts[host]?.isEmpty == true { prompts[host] = nil }
            return next
        }
        if let next = notices[host]?.first {
            notices[host]?.removeFirst()
            if notices[host]?.isEmpty == true { notices[host] = nil }
            return next
        }
        let left = inFlight[host, default: 1] - 1
        inFlight[host] = left > 0 ? left : nil
        return nil
    }
}

import DequeModule
import Foundation
import Synchronization

/// Fixed-window counters per key, with bounded memory and O(1) amortised work per call.
///
/// A key's window opens at its first event and lasts `limit.window`; the
/// count resets when it ends. Keys live in insertion order in a deque, so idle
/// keys are evicted from its front as their windows end. When `capacity` keys
/// are tracked, a new key evicts the oldest one: a flood of distinct keys
/// cannot grow memory, at the price of forgetting the oldest counters (the
/// per-IP limits still hold such a flood back).
public final class RateLimiter: Sendable {
    public let limit: RateLimit
    public let capacity: Int
    private let state = Mutex(State())

    struct Entry {
        var count: Int
        var opened: Double
    }

    struct State {
        var entries: [String: Entry] = [:]
        /// Keys in the order their windows opened; may hold stale pairs whose key re-opened since.
        var order: Deque<(key: String, opened: Double)> = []
    }

    public init(limit: RateLimit, capacity: Int = 50_000) {
        precondition(limit.count > 0 && limit.window > 0 && capacity > 0)
        self.limit = limit
        self.capacity = capacity
    }

    /// Counts one event for `key` unless the limit is reached.
    /// - Returns: `nil` when allowed, else the whole seconds until it will be.
    public func hit(_ key: String, now: Date = Date()) -> Int? {
        update(key, now: now, count: true, refuseAtLimit: true)
    }

    /// Whether `key` is over its limit, without counting (for failure-based limits).
    public func check(_ key: String, now: Date = Date()) -> Int? {
        update(key, now: now, count: false, refuseAtLimit: true)
    }

    /// Counts one failure for `key`.
    public func record(_ key: String, now: Date = Date()) {
        _ = update(key, now: now, count: true, refuseAtLimit: false)
    }

    /// How many keys are tracked now (for tests and metrics).
    public var trackedKeys: Int { state.withLock { $0.entries.count } }

    private func update(_ key: String, now: Date, count: Bool, refuseAtLimit: Bool) -> Int? {
        let now = now.timeIntervalSince1970
        let window = limit.window
        let maximum = limit.count
        let capacity = capacity
        return state.withLock { state in
            Self.evictEnded(&state, now: now, window: window)
            if var entry = state.entries[key] {
                if refuseAtLimit && entry.count >= maximum {
                    return max(1, Int((entry.opened + window - now).rounded(.up)))
                }
                if count {
                    entry.count += 1
                    state.entries[key] = entry
                }
                return nil
            }
            guard count else { return nil }
            while state.entries.count >= capacity, let oldest = state.order.popFirst() {
                if state.entries[oldest.key]?.opened == oldest.opened { state.entries[oldest.key] = nil }
            }
            state.entries[key] = Entry(count: 1, opened: now)
            state.order.append((key, now))
            return nil
        }
    }

    private static func evictEnded(_ state: inout State, now: Double, window: Double) {
        while let oldest = state.order.first, oldest.opened + window <= now {
            state.order.removeFirst()
            if state.entries[oldest.key]?.opened == oldest.opened { state.entries[oldest.key] = nil }
        }
    }
}

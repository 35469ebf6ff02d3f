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
///
/// Refusals are not reported one by one: a window's first refusal makes its
/// audit event (the `refusal` argument, evaluated then and only then, so the
/// caller can record it at once), and the window keeps it with a count,
/// handed out once by ``takeReports(now:includingOpenWindows:)`` when the
/// window ends, so a flood writes at most two audit rows per key and window.
public final class WindowCounter: Sendable {
    public let limit: RateLimit
    public let capacity: Int
    private let state = Mutex(State())

    struct Entry {
        var count: Int
        var opened: Double
        var refusals = 0
        var firstRefusal: AuditEvent?
    }

    struct State {
        var entries: [String: Entry] = [:]
        /// Keys in the order their windows opened; may hold stale pairs whose key re-opened since.
        var order: Deque<(key: String, opened: Double)> = []
        /// Refusals of windows that ended (or were evicted), waiting to be reported.
        var reports: [Report] = []
    }

    /// The refusals of one key in one window: its first refused attempt and how many there were.
    public struct Report: Sendable, Equatable {
        public var firstRefusal: AuditEvent
        public var refusals: Int

        public init(firstRefusal: AuditEvent, refusals: Int) {
            self.firstRefusal = firstRefusal
            self.refusals = refusals
        }
    }

    /// An attempt counted ahead of its work, for ``refund(_:)`` should it succeed.
    public struct Reservation: Sendable, Equatable {
        public let key: String
        /// When the window it was counted in opened (Unix seconds).
        public let opened: Double

        public init(key: String, opened: Double) {
            self.key = key
            self.opened = opened
        }
    }

    /// Whether an attempt may go ahead.
    public enum Admission: Sendable, Equatable {
        case admitted(Reservation)
        /// Over the limit: retry after this many whole seconds.
        case refused(retryAfter: Int)
    }

    public init(limit: RateLimit, capacity: Int = 50_000) {
        precondition(limit.count > 0 && limit.window > 0 && capacity > 0)
        self.limit = limit
        self.capacity = capacity
    }

    /// Counts one event for `key` unless the limit is reached.
    /// - Parameter refusal: what to report, once per window, if this attempt is
    ///   refused; made only then.
    /// - Returns: `nil` when allowed, else the whole seconds until it will be.
    public func hit(_ key: String, now: Date = Date(), refusal: @autoclosure () -> AuditEvent? = nil) -> Int? {
        switch reserve(key, now: now, refusal: refusal()) {
        case .admitted: nil
        case .refused(let retryAfter): retryAfter
        }
    }

    /// Counts an attempt before its work is done, unless the limit is reached:
    /// however many attempts run in parallel, at most `limit.count` are
    /// admitted per window. ``refund(_:)`` takes back one that succeeded, so
    /// that only failures stay counted (failure limits).
    public func reserve(_ key: String, now: Date = Date(), refusal: @autoclosure () -> AuditEvent? = nil) -> Admission {
        let now = now.timeIntervalSince1970
        let window = limit.window
        let maximum = limit.count
        let capacity = capacity
        return state.withLock { state in
            Self.evictEnded(&state, now: now, window: window, capacity: capacity)
            if var entry = state.entries[key] {
                if entry.count >= maximum {
                    entry.refusals += 1
                    if entry.firstRefusal == nil { entry.firstRefusal = refusal() }
                    state.entries[key] = entry
                    return .refused(retryAfter: max(1, Int((entry.opened + window - now).rounded(.up))))
                }
                entry.count += 1
                state.entries[key] = entry
                return .admitted(Reservation(key: key, opened: entry.opened))
            }
            while state.entries.count >= capacity, let oldest = state.order.popFirst() {
                Self.remove(oldest, from: &state, capacity: capacity)
            }
            state.entries[key] = Entry(count: 1, opened: now)
            state.order.append((key, now))
            return .admitted(Reservation(key: key, opened: now))
        }
    }

    /// Records a refusal decided elsewhere (a cluster's shared counter) for
    /// the once-per-window report, as if this node's own count were full.
    public func noteRefusal(_ key: String, opened: Date, refusal: @autoclosure () -> AuditEvent?) {
        let opened = opened.timeIntervalSince1970
        let maximum = limit.count
        let capacity = capacity
        state.withLock { state in
            if var entry = state.entries[key], entry.opened == opened {
                entry.refusals += 1
                if entry.firstRefusal == nil { entry.firstRefusal = refusal() }
                state.entries[key] = entry
                return
            }
            if let entry = state.entries[key] {
                Self.remove((key, entry.opened), from: &state, capacity: capacity)
            }
            while state.entries.count >= capacity, let oldest = state.order.popFirst() {
                Self.remove(oldest, from: &state, capacity: capacity)
            }
            state.entries[key] = Entry(count: maximum, opened: opened, refusals: 1, firstRefusal: refusal())
            state.order.append((key, opened))
        }
    }

    /// Takes back a reserved attempt (it succeeded), if its window is still the one it was counted in.
    public func refund(_ reservation: Reservation) {
        state.withLock { state in
            guard var entry = state.entries[reservation.key], entry.opened == reservation.opened, entry.count > 0 else { return }
            entry.count -= 1
            state.entries[reservation.key] = entry
        }
    }

    /// The refusals to report: those of every window that has ended by `now`
    /// and, with `includingOpenWindows` (on shutdown), those of open windows too.
    /// Each refused window is reported once.
    public func takeReports(now: Date = Date(), includingOpenWindows: Bool = false) -> [Report] {
        let now = now.timeIntervalSince1970
        let window = limit.window
        let capacity = capacity
        return state.withLock { state in
            Self.evictEnded(&state, now: now, window: window, capacity: capacity)
            if includingOpenWindows {
                for (key, entry) in state.entries {
                    guard let first = entry.firstRefusal else { continue }
                    state.reports.append(Report(firstRefusal: first, refusals: entry.refusals))
                    state.entries[key]?.firstRefusal = nil
                    state.entries[key]?.refusals = 0
                }
            }
            defer { state.reports = [] }
            return state.reports
        }
    }

    /// How many keys are tracked now (for tests and metrics).
    public var trackedKeys: Int { state.withLock { $0.entries.count } }

    private static func evictEnded(_ state: inout State, now: Double, window: Double, capacity: Int) {
        while let oldest = state.order.first, oldest.opened + window <= now {
            state.order.removeFirst()
            remove(oldest, from: &state, capacity: capacity)
        }
    }

    /// Forgets a key's window (unless the key re-opened since), keeping its refusals for the report.
    private static func remove(_ pair: (key: String, opened: Double), from state: inout State, capacity: Int) {
        guard let entry = state.entries[pair.key], entry.opened == pair.opened else { return }
        state.entries[pair.key] = nil
        // Bounded like the keys: reports are taken every second, so this only fills under a flood of new keys.
        if let first = entry.firstRefusal, state.reports.count < capacity {
            state.reports.append(Report(firstRefusal: first, refusals: entry.refusals))
        }
    }
}

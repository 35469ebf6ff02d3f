import HeapModule

/// The long polls parked on this node, as a value the broker owns: each
/// waiter by request id and number, and every waiter's timeout, soonest
/// first. Whoever takes a waiter out resumes it; a waiter is taken at most
/// once, whichever of its wake-ups comes first (a transition, its timeout,
/// its caller's cancellation, the server draining). Generic over the waiter
/// (the broker parks continuations), so that its rules are tested as plain values.
struct LongPollWaiters<Waiter> {
    private var parked: [String: [Int: Waiter]] = [:]
    private var nextNumber = 0
    /// Timeouts of waiters parked now or earlier (one woken otherwise stays until due, then wakes nothing).
    private var timeouts = Heap<WaiterTimeout>()

    /// A number no waiter had before.
    mutating func newNumber() -> Int {
        defer { nextNumber += 1 }
        return nextNumber
    }

    mutating func park(_ waiter: Waiter, id: String, number: Int) {
        parked[id, default: [:]][number] = waiter
    }

    /// Every waiter of request `id`: it changed.
    mutating func takeAll(_ id: String) -> [Waiter] {
        guard let waiting = parked.removeValue(forKey: id) else { return [] }
        return Array(waiting.values)
    }

    /// Waiter `number` of request `id`, if it is still parked.
    mutating func take(_ id: String, number: Int) -> Waiter? {
        guard let waiter = parked[id]?.removeValue(forKey: number) else { return nil }
        if parked[id]?.isEmpty == true { parked[id] = nil }
        return waiter
    }

    /// Keeps `timeout` until it is due.
    mutating func schedule(_ timeout: WaiterTimeout) {
        timeouts.insert(timeout)
    }

    /// Removes and returns the timeouts due at `now`, soonest first.
    mutating func takeDue(at now: ContinuousClock.Instant) -> [WaiterTimeout] {
        var due: [WaiterTimeout] = []
        while let soonest = timeouts.min, soonest.at <= now {
            due.append(timeouts.removeMin())
        }
        return due
    }

    /// When the soonest timeout is due, if any is kept.
    var soonest: ContinuousClock.Instant? { timeouts.min?.at }

    /// The requests with a waiter.
    var ids: [String] { Array(parked.keys) }

    /// Waiters of request `id` parked now.
    func waiting(on id: String) -> Int { parked[id]?.count ?? 0 }

    /// Waiters parked now.
    var count: Int { parked.values.reduce(0) { $0 + $1.count } }

    /// Numbers handed out so far: one per parking, a waiter that parks again included.
    var numbersHandedOut: Int { nextNumber }
}

/// When a long-poll waiter stops waiting, if nothing woke it before.
struct WaiterTimeout: Comparable, Sendable {
    let at: ContinuousClock.Instant
    let id: String
    let number: Int

    static func < (lhs: Self, rhs: Self) -> Bool { (lhs.at, lhs.number) < (rhs.at, rhs.number) }
    static func == (lhs: Self, rhs: Self) -> Bool { lhs.number == rhs.number }
}

extension LongPollWaiters: Sendable where Waiter: Sendable {}

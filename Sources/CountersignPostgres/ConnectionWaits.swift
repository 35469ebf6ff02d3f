import Synchronization

/// Callers waiting for a pooled connection, each with the instant it gives
/// up. One task (``run()``) looks four times a second and cancels the overdue
/// waits: cheaper than a timer per query, which every query would pay.
final class ConnectionWaits: Sendable {
    private struct Waiting {
        let deadline: ContinuousClock.Instant
        let giveUp: @Sendable () -> Void
    }

    private let waiting = Mutex<(next: UInt64, all: [UInt64: Waiting])>((0, [:]))

    /// Registers a wait; `giveUp` is called once `deadline` has passed, unless it is removed first.
    func add(deadline: ContinuousClock.Instant, giveUp: @escaping @Sendable () -> Void) -> UInt64 {
        waiting.withLock { waiting in
            waiting.next += 1
            waiting.all[waiting.next] = Waiting(deadline: deadline, giveUp: giveUp)
            return waiting.next
        }
    }

    func remove(_ id: UInt64) {
        _ = waiting.withLock { $0.all.removeValue(forKey: id) }
    }

    /// Gives up the overdue waits until cancelled.
    func run() async {
        while !Task.isCancelled {
            try? await Task.sleep(for: .milliseconds(250))
            let now = ContinuousClock.now
            let overdue = waiting.withLock { waiting in
                let ids = waiting.all.filter { $0.value.deadline <= now }.map(\.key)
                return ids.compactMap { waiting.all.removeValue(forKey: $0)?.giveUp }
            }
            for giveUp in overdue { giveUp() }
        }
    }
}

import PostgresNIO
import Synchronization

/// Waits with a bound (a caller's wait for a pooled connection, a query on its
/// connection), each with the instant it gives up. One task (``run()``) looks
/// four times a second and gives up the overdue ones: cheaper than a timer per
/// query, which every query would pay.
final class WaitDeadlines: Sendable {
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

    /// Runs `body` on `connection`, closing the connection under it (and calling
    /// `cut`) if it runs past `limit`, which fails its statement at once. A body
    /// cut as it ended waits for the close before returning, so the connection's
    /// pool sees it closed before it could hand it to another caller.
    func bounding<T>(
        _ connection: PostgresConnection, to limit: Duration, cut: @escaping @Sendable () -> Void, _ body: () async throws -> T
    ) async throws -> T {
        let running = RunningQuery()
        let overdue = add(deadline: .now + limit) {
            // Only while the body runs: once it is done the connection is someone else's.
            guard running.cut() else { return }
            connection.close().whenComplete { _ in }
            cut()
        }
        defer { remove(overdue) }
        func ended() async { if !running.finish() { _ = try? await connection.closeFuture.get() } }
        do {
            let value = try await body()
            await ended()
            return value
        } catch {
            await ended()
            throw error
        }
    }
}

/// A bounded body on its connection: it finishes, or it is cut (its connection
/// closed) when it runs past its limit, whichever comes first.
private final class RunningQuery: Sendable {
    private enum Phase { case running, finished, cut }
    private let phase = Mutex(Phase.running)

    /// The limit passed: `true` if the body was still running (the connection is to be closed).
    func cut() -> Bool {
        phase.withLock { phase in
            guard case .running = phase else { return false }
            phase = .cut
            return true
        }
    }

    /// The body ended: `false` if it had been cut.
    func finish() -> Bool {
        phase.withLock { phase in
            guard case .running = phase else { return false }
            phase = .finished
            return true
        }
    }
}

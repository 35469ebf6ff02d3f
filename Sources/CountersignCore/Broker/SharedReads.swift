import Synchronization

/// Reads of one key asked for at the same time share one query.
///
/// A caller never joins a read already under way: that read may have looked
/// before the caller asked, and missed a commit the caller has seen (another
/// node's notification that woke it, an answer its client already got). It
/// joins the next read instead, which starts as soon as the one under way
/// ends. So every value handed out was read after its caller asked, and any
/// number of callers asking together cost at most two reads: the one under
/// way, and one for all who asked while it ran.
///
/// A caller with no read under way reads in its own task, as without this
/// type. A shared read runs in a task of its own, so one caller's
/// cancellation does not fail the others; a read that fails, fails everyone
/// who waited for it (each would have run it alone).
///
/// A read under way for longer than `patience` is not waited for: its query
/// may be stuck (a connection half-open after a failover), and a caller then
/// reads on its own, as without this type. Only the callers who came within
/// the first `patience` of a stuck read wait for it to fail.
final class SharedReads<Value: Sendable>: Sendable {
    private typealias Waiter = CheckedContinuation<Value, any Error>

    /// A read under way: since when, and the callers waiting for the next read.
    private struct Reading {
        var since: ContinuousClock.Instant
        var next: [Waiter] = []
    }

    /// What a caller does: read and hand over, wait for the next read, or read on its own.
    private enum Way { case lead, join, alone }

    private let reading = Mutex<[String: Reading]>([:])
    private let patience: Duration
    private let read: @Sendable (String) async throws -> Value

    init(patience: Duration = .milliseconds(250), read: @escaping @Sendable (String) async throws -> Value) {
        self.patience = patience
        self.read = read
    }

    /// `key`'s value, read after this call began.
    func value(of key: String) async throws -> Value {
        let now = ContinuousClock.now
        let way = reading.withLock { reading -> Way in
            guard let under = reading[key] else {
                reading[key] = Reading(since: now)
                return .lead
            }
            return now - under.since > patience ? .alone : .join
        }
        switch way {
        case .alone:
            return try await read(key)
        case .lead:
            defer { handOver(key) }
            return try await read(key)
        case .join:
            return try await withCheckedThrowingContinuation { (waiter: Waiter) in
                let runsItself = reading.withLock { reading in
                    guard reading[key] == nil else {
                        reading[key]!.next.append(waiter)
                        return false
                    }
                    // The read under way ended in between: nobody will hand over to this caller.
                    reading[key] = Reading(since: .now)
                    return true
                }
                if runsItself { Task { await self.run(key, for: [waiter]) } }
            }
        }
    }

    /// Callers waiting for the next read of `key` now.
    func waiting(for key: String) -> Int {
        reading.withLock { $0[key]?.next.count ?? 0 }
    }

    /// A read of `key` ended: whoever asked while it ran gets a read started now.
    private func handOver(_ key: String) {
        let next = reading.withLock { reading in
            let next = reading[key]?.next ?? []
            reading[key] = next.isEmpty ? nil : Reading(since: .now)
            return next
        }
        if !next.isEmpty { Task { await run(key, for: next) } }
    }

    private func run(_ key: String, for waiters: [Waiter]) async {
        let result: Result<Value, any Error>
        do {
            result = .success(try await read(key))
        } catch {
            result = .failure(error)
        }
        handOver(key)
        for waiter in waiters { waiter.resume(with: result) }
    }
}

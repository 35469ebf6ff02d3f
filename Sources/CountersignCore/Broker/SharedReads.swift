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
final class SharedReads<Value: Sendable>: Sendable {
    private typealias Waiter = CheckedContinuation<Value, any Error>

    /// For each key read now, the callers waiting for the next read.
    private let reading = Mutex<[String: [Waiter]]>([:])
    private let read: @Sendable (String) async throws -> Value

    init(read: @escaping @Sendable (String) async throws -> Value) {
        self.read = read
    }

    /// `key`'s value, read after this call began.
    func value(of key: String) async throws -> Value {
        let leads = reading.withLock { reading in
            guard reading[key] == nil else { return false }
            reading[key] = []
            return true
        }
        guard !leads else {
            defer { handOver(key) }
            return try await read(key)
        }
        return try await withCheckedThrowingContinuation { (waiter: Waiter) in
            let runsItself = reading.withLock { reading in
                guard reading[key] == nil else {
                    reading[key]!.append(waiter)
                    return false
                }
                // The read under way ended in between: nobody will hand over to this caller.
                reading[key] = []
                return true
            }
            if runsItself { Task { await self.run(key, for: [waiter]) } }
        }
    }

    /// Callers waiting for the next read of `key` now.
    func waiting(for key: String) -> Int {
        reading.withLock { $0[key]?.count ?? 0 }
    }

    /// A read of `key` ended: whoever asked while it ran gets a read started now.
    private func handOver(_ key: String) {
        let next = reading.withLock { reading in
            let next = reading[key] ?? []
            reading[key] = next.isEmpty ? nil : []
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

import Synchronization

/// A bounded admission gate for costly work (bcrypt): at most `capacity` jobs
/// running or waiting at once; one more is turned away at once instead of
/// queueing, so a burst cannot stall every caller for everyone.
public final class WorkGate: Sendable {
    public let capacity: Int
    private let admitted = Mutex(0)

    public init(capacity: Int) {
        precondition(capacity > 0)
        self.capacity = capacity
    }

    /// Runs `work` if there is room, else throws ``HashingQueueFull``.
    public func run<T: Sendable>(_ work: () async throws -> T) async throws -> T {
        let entered = admitted.withLock { count in
            guard count < capacity else { return false }
            count += 1
            return true
        }
        guard entered else { throw HashingQueueFull() }
        defer { admitted.withLock { $0 -= 1 } }
        return try await work()
    }

    /// Jobs running or waiting now.
    public var inUse: Int { admitted.withLock { $0 } }
}

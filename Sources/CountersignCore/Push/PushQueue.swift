import DequeModule
import Synchronization

/// The hand-off from the broker to the push dispatcher: the broker never waits
/// for a push. Prompts go first: a resolution notice ("the prompt is gone") is
/// taken only while no prompt waits, so a burst of answers never delays the
/// next user's prompt. Bounded per kind: under a flood the oldest job of that
/// kind is dropped (a prompt that waited that long is stale anyway), and
/// ``enqueue(_:)`` hands it back so the broker can count and audit it.
///
/// One consumer (the dispatcher) iterates it; iteration ends when that task is cancelled.
public final class PushQueue: AsyncSequence, Sendable {
    public typealias Element = PushJob
    public let capacity: Int
    private let state = Mutex(State())

    struct State {
        var prompts: Deque<PushJob> = []
        var resolutions: Deque<PushJob> = []
        /// The consumer, parked while both queues are empty.
        var waiter: CheckedContinuation<PushJob?, Never>?
        var dropped = 0
    }

    public init(capacity: Int = 10_000) {
        precondition(capacity > 0)
        self.capacity = capacity
    }

    /// Queues a job; returns the job dropped to make room, if the queue of its kind was full.
    @discardableResult
    public func enqueue(_ job: PushJob) -> PushJob? {
        state.withLock { state in
            if let waiter = state.waiter {
                state.waiter = nil
                waiter.resume(returning: job)
                return nil
            }
            var dropped: PushJob?
            switch job {
            case .prompt:
                if state.prompts.count >= capacity { dropped = state.prompts.popFirst() }
                state.prompts.append(job)
            case .resolved, .deviceAdded:
                if state.resolutions.count >= capacity { dropped = state.resolutions.popFirst() }
                state.resolutions.append(job)
            }
            if dropped != nil { state.dropped += 1 }
            return dropped
        }
    }

    /// The next job, prompts first; waits while there is none; `nil` once the caller is cancelled.
    public func next() async -> PushJob? {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<PushJob?, Never>) in
                state.withLock { state in
                    // Checked under the lock the cancel handler takes too: one of
                    // the two always sees the other, so the consumer is never left parked.
                    if Task.isCancelled {
                        continuation.resume(returning: nil)
                    } else if let job = state.prompts.popFirst() ?? state.resolutions.popFirst() {
                        continuation.resume(returning: job)
                    } else {
                        state.waiter = continuation
                    }
                }
            }
        } onCancel: {
            state.withLock { state in
                state.waiter?.resume(returning: nil)
                state.waiter = nil
            }
        }
    }

    /// Jobs dropped so far because their queue was full.
    public var dropped: Int { state.withLock { $0.dropped } }
    /// Jobs waiting now.
    public var count: Int { state.withLock { $0.prompts.count + $0.resolutions.count } }

    public struct AsyncIterator: AsyncIteratorProtocol {
        let queue: PushQueue
        public mutating func next() async -> PushJob? { await queue.next() }
    }

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(queue: self) }
}

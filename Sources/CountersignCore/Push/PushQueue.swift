import DequeModule
import Synchronization

/// The hand-off from the broker to the push dispatcher: the broker never waits
/// for a push. Prompts go first: a resolution notice ("the prompt is gone") is
/// taken only while no prompt waits, so a burst of answers never delays the
/// next user's prompt. Bounded per kind: under a flood the oldest job of that
/// kind is dropped (a prompt that waited that long is stale anyway), and
/// ``PromptFirstQueue/enqueue(_:)`` hands it back so the broker can count and audit it.
public typealias PushQueue = PromptFirstQueue<PushJob>

extension PromptFirstQueue where Item == PushJob {
    public convenience init(capacity: Int = 10_000) {
        self.init(capacity: capacity, isPrompt: \.isPrompt)
    }
}

extension PushJob {
    /// A prompt (first in every queue), not a notice.
    public var isPrompt: Bool {
        if case .prompt = self { return true }
        return false
    }
}

/// A bounded queue that hands out prompts before anything else: the push
/// queue, and each provider's lane in the push dispatcher.
///
/// One consumer iterates it; iteration ends when that task is cancelled or
/// the queue is finished (what still waits then is left).
public final class PromptFirstQueue<Item: Sendable>: AsyncSequence, Sendable {
    public typealias Element = Item
    public let capacity: Int
    private let isPrompt: @Sendable (Item) -> Bool
    private let state = Mutex(State())

    struct State {
        var prompts: Deque<Item> = []
        var others: Deque<Item> = []
        /// The consumer, parked while both queues are empty.
        var waiter: CheckedContinuation<Item?, Never>?
        var dropped = 0
        var finished = false
    }

    public init(capacity: Int, isPrompt: @escaping @Sendable (Item) -> Bool) {
        precondition(capacity > 0)
        self.capacity = capacity
        self.isPrompt = isPrompt
    }

    /// Queues an item; returns the item dropped to make room, if the queue of its kind was full.
    @discardableResult
    public func enqueue(_ item: Item) -> Item? {
        let prompt = isPrompt(item)
        return state.withLock { state in
            if let waiter = state.waiter {
                state.waiter = nil
                waiter.resume(returning: item)
                return nil
            }
            var dropped: Item?
            if prompt {
                if state.prompts.count >= capacity { dropped = state.prompts.popFirst() }
                state.prompts.append(item)
            } else {
                if state.others.count >= capacity { dropped = state.others.popFirst() }
                state.others.append(item)
            }
            if dropped != nil { state.dropped += 1 }
            return dropped
        }
    }

    /// Ends the consumer's iteration once it asks for the next item.
    public func finish() {
        state.withLock { state in
            state.finished = true
            state.waiter?.resume(returning: nil)
            state.waiter = nil
        }
    }

    /// The next item, prompts first; waits while there is none; `nil` once the caller is cancelled or the queue finished.
    public func next() async -> Item? {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Item?, Never>) in
                state.withLock { state in
                    // Checked under the lock the cancel handler takes too: one of
                    // the two always sees the other, so the consumer is never left parked.
                    if Task.isCancelled || state.finished {
                        continuation.resume(returning: nil)
                    } else if let item = state.prompts.popFirst() ?? state.others.popFirst() {
                        continuation.resume(returning: item)
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

    /// The items at the front of the queue that `belongs` accepts, prompts first, at most `limit`;
    /// none when none does. Each queue is taken from its front only, up to its first item refused:
    /// nothing behind it is looked at, and nothing is taken ahead of it. Does not wait.
    public func takeWaiting(upTo limit: Int, while belongs: (Item) -> Bool) -> [Item] {
        state.withLock { state in
            var taken: [Item] = []
            while taken.count < limit, let item = state.prompts.first, belongs(item) { taken.append(state.prompts.removeFirst()) }
            while taken.count < limit, let item = state.others.first, belongs(item) { taken.append(state.others.removeFirst()) }
            return taken
        }
    }

    /// Items dropped so far because their queue was full.
    public var dropped: Int { state.withLock { $0.dropped } }
    /// Items waiting now.
    public var count: Int { state.withLock { $0.prompts.count + $0.others.count } }

    public struct AsyncIterator: AsyncIteratorProtocol {
        let queue: PromptFirstQueue
        public mutating func next() async -> Item? { await queue.next() }
    }

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(queue: self) }
}

import DequeModule
import Foundation
import Synchronization

/// Where audit events go: `record` never waits; a writer takes everything
/// gathered since its last write in one batch (one transaction). Bounded: past
/// `capacity` unwritten events the oldest are dropped and counted.
public final class AuditLog: Sendable {
    private let buffer = Mutex<(events: Deque<AuditEvent>, dropped: Int)>(([], 0))
    private let signal: AsyncStream<Void>.Continuation
    /// Yields whenever events are waiting.
    public let wakeups: AsyncStream<Void>
    public let capacity: Int

    public init(capacity: Int = 100_000) {
        self.capacity = capacity
        (wakeups, signal) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
    }

    public func record(_ event: AuditEvent) {
        buffer.withLock { buffer in
            if buffer.events.count >= capacity {
                buffer.events.removeFirst()
                buffer.dropped += 1
            }
            buffer.events.append(event)
        }
        signal.yield()
    }

    /// Puts back, ahead of any recorded since, events a writer took but could
    /// not write; past `capacity` the oldest are dropped and counted.
    public func putBack(_ events: [AuditEvent]) {
        buffer.withLock { buffer in
            buffer.events.prepend(contentsOf: events)
            let excess = buffer.events.count - capacity
            if excess > 0 {
                buffer.events.removeFirst(excess)
                buffer.dropped += excess
            }
        }
    }

    /// Wakes the writer, as a recorded event does.
    public func wake() { signal.yield() }

    /// Everything recorded since the last call, and how many events were dropped meanwhile.
    public func take() -> (events: [AuditEvent], dropped: Int) {
        buffer.withLock { buffer in
            defer { buffer = ([], 0) }
            return (Array(buffer.events), buffer.dropped)
        }
    }
}

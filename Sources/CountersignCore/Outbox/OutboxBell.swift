/// Rung after a transaction queued something in the outbox, so the sender
/// does not wait for its next round. Rings coalesce: one waiting is enough.
public final class OutboxBell: Sendable {
    public let rings: AsyncStream<Void>
    private let continuation: AsyncStream<Void>.Continuation

    public init() {
        (rings, continuation) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
    }

    public func ring() { continuation.yield() }
}

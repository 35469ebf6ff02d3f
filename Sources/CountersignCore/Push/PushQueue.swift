/// The hand-off from the broker to the push dispatcher: the broker never waits
/// for a push. Bounded: under a flood the oldest jobs are dropped rather than
/// memory growing without limit (a prompt that waited that long is stale anyway).
public struct PushQueue: Sendable {
    public let jobs: AsyncStream<PushJob>
    let continuation: AsyncStream<PushJob>.Continuation

    public init(capacity: Int = 10_000) {
        (jobs, continuation) = AsyncStream.makeStream(of: PushJob.self, bufferingPolicy: .bufferingNewest(capacity))
    }

    func enqueue(_ job: PushJob) {
        continuation.yield(job)
    }
}

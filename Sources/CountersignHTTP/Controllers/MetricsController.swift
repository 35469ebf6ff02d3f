import CountersignCore
import CountersignServices
import Hummingbird
import NIOCore
import Prometheus

/// `GET /metrics`: Prometheus text exposition.
struct MetricsController: Sendable {
    let metrics: AppMetrics
    let broker: ApprovalBroker
    let pushQueue: PushQueue
    let outbox: any OutboxStore
    let longPolls: LongPollSlots

    func addRoutes(to router: Router<AppRequestContext>) {
        router.get("metrics", use: scrape)
    }

    @Sendable func scrape(_ request: Request, context: AppRequestContext) async throws -> Response {
        metrics.live(await broker.liveCounts())
        metrics.pushQueue(waiting: pushQueue.count, dropped: pushQueue.dropped)
        metrics.outboxWaiting(try await outbox.outboxDepth())
        metrics.longPollsWaiting(longPolls.held)
        let bytes = metrics.exposition()
        return Response(
            status: .ok,
            headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
            body: .init(byteBuffer: ByteBuffer(bytes: bytes))
        )
    }
}

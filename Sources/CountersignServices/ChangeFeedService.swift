import CountersignCore
import ServiceLifecycle

/// Carries another node's transitions to this node's broker, for as long as
/// the daemon runs (a cluster on a shared database).
public struct ChangeFeedService: Service {
    let feed: any ChangeFeed
    let broker: ApprovalBroker

    public init(feed: any ChangeFeed, broker: ApprovalBroker) {
        self.feed = feed
        self.broker = broker
    }

    public func run() async throws {
        let broker = broker
        await cancelWhenGracefulShutdown {
            await feed.follow(onChange: { await broker.changed($0) }, onGap: { await broker.recheckAll() })
        }
    }
}

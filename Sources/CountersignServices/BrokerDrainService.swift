import CountersignCore
import ServiceLifecycle

/// Listed after the application in the service group, so it hears graceful
/// shutdown first: it answers every waiting long poll with the current state,
/// letting the HTTP server finish its in-flight requests at once.
public struct BrokerDrainService: Service {
    let broker: ApprovalBroker

    public init(broker: ApprovalBroker) {
        self.broker = broker
    }

    public func run() async throws {
        try? await gracefulShutdown()
        await broker.drain()
    }
}

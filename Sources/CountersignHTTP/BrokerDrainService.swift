import CountersignCore
import ServiceLifecycle

/// Listed after the application in the service group, so it hears graceful
/// shutdown first: it answers every waiting long poll with the current state,
/// letting the HTTP server finish its in-flight requests at once.
struct BrokerDrainService: Service {
    let broker: ApprovalBroker

    func run() async throws {
        try? await gracefulShutdown()
        await broker.drain()
    }
}

import CountersignCore
import CountersignHTTP
import CountersignServices
import Hummingbird
import Logging
import ServiceLifecycle
import Synchronization
import UnixSignals

/// The whole daemon, wired: store, broker, push dispatch and HTTP application.
/// Built by ``buildApplication(configuration:logger:pushSender:mailSender:environment:onServerRunning:)``.
public struct CountersignServer: Sendable {
    public let configuration: ServeConfiguration
    public let store: any CountersignStorage
    public let broker: ApprovalBroker
    public let application: Application<RouterResponder<AppRequestContext>>
    /// Every route, as `METHOD /path/{parameter}`: what `docs/openapi.yaml` must document.
    public let routes: [String]
    public let metrics: AppMetrics
    /// The port `/metrics` listens on, once it does (`nil` before, or with `--metrics-listen off`).
    public let metricsPort: ListenerPort
    /// The systemd notifier, when running under systemd (`$NOTIFY_SOCKET`).
    let systemd: SystemdService?

    /// In shutdown order, last first: systemd hears `STOPPING` first, then every
    /// long poll is answered, then the application's own services shut down.
    public var services: [any Service] {
        [application, BrokerDrainService(broker: broker)] + (systemd.map { [$0] } ?? [])
    }

    /// Runs until SIGTERM or SIGINT, then shuts down gracefully: long polls are
    /// answered at once, in-flight requests finish, the database is checkpointed.
    public func run(logger: Logger) async throws {
        var configuration = ServiceGroupConfiguration(services: services, gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
        // systemd's TimeoutStopSec is 15 s; finish well inside it.
        configuration.maximumGracefulShutdownDuration = .seconds(8)
        let group = ServiceGroup(configuration: configuration)
        try await group.run()
        try store.checkpoint()
        try store.close()
        logger.info("stopped")
    }
}

/// A port known once its listener is up.
public final class ListenerPort: Sendable {
    private let port = Mutex<Int?>(nil)

    public init() {}

    public var value: Int? { port.withLock { $0 } }
    func set(_ value: Int) { port.withLock { $0 = value } }
}

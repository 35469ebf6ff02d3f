import CountersignCore
import CountersignPush
import CountersignStore
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import ServiceLifecycle
import UnixSignals

/// The whole daemon, wired: store, broker, push dispatch and HTTP application.
public struct CountersignServer: Sendable {
    public let configuration: ServeConfiguration
    public let store: SQLiteStore
    public let broker: ApprovalBroker
    public let application: Application<RouterResponder<AppRequestContext>>
    /// Every route, as `METHOD /path/{parameter}`: what `docs/openapi.yaml` must document.
    public let routes: [String]
    public let metrics: AppMetrics
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

/// Builds the daemon from its configuration: opens and migrates the database,
/// loads live requests when the server starts, and routes the API.
///
/// - Parameters:
///   - pushSender: where pushes go; by default FCM when a service account is
///     configured, else a sender that only logs (push off).
///   - onServerRunning: called with the bound port once the listener is up.
///   - environment: where `NOTIFY_SOCKET` and `WATCHDOG_USEC` are read (systemd).
public func buildServer(
    configuration: ServeConfiguration,
    logger: Logger,
    pushSender: (any PushSender)? = nil,
    environment: [String: String] = [:],
    onServerRunning: @escaping @Sendable (Int) async -> Void = { _ in }
) async throws -> CountersignServer {
    let store = try SQLiteStore(path: configuration.databasePath, logger: logger)
    let hasher = BcryptPasswordHasher(cost: configuration.bcryptCost)
    let pushQueue = PushQueue()
    let audit = AuditLog()
    let metrics = AppMetrics()
    let broker = ApprovalBroker(
        store: store, configuration: configuration.broker, pushQueue: pushQueue, audit: audit, logger: logger,
        observer: { metrics.transition($0) })
    let abuse = AbuseGuard(limits: RateLimits(configuration.rateLimits), audit: audit, metrics: metrics)
    let push = pushSender == nil ? try await PushSetup.make(settings: configuration.push, accounts: store, logger: logger) : nil
    let sender: any PushSender = pushSender ?? push?.sender ?? LoggingPushSender()
    let pushState: @Sendable () -> String = {
        if let fcm = push?.sender { return fcm.healthState }
        return pushSender == nil ? "disabled" : "ok"
    }
    let (readyPorts, readyContinuation) = AsyncStream.makeStream(of: Int.self)
    let systemd = SystemdNotifier(environment: environment).map { notifier in
        SystemdService(
            notifier: notifier,
            watchdog: SystemdNotifier.watchdogInterval(environment: environment),
            ready: readyPorts,
            broker: broker,
            store: store,
            summary: { port, live in
                "listening on \(configuration.host):\(port); \(live[.pending] ?? 0) pending, \(live[.approved] ?? 0) approved; push \(pushState())"
            },
            logger: logger
        )
    }
    let decoyHash = try await hasher.hash(SecureToken.apiKey())

    let router = Router(context: AppRequestContext.self)
    router.add(middleware: AccessLogMiddleware())
    router.add(middleware: MetricsMiddleware(metrics: metrics))
    router.add(middleware: ErrorMiddleware())
    router.add(middleware: BodyLimitMiddleware())
    router.add(middleware: ClientAddressMiddleware(trusted: configuration.trustedProxies))
    let authenticator = DeviceAuthenticator(accounts: store)
    let mobile = router.group("api/mobile")
    MobileAuthController(
        accounts: store, hasher: hasher, authenticator: authenticator, abuse: abuse, audit: audit, decoyHash: decoyHash
    ).addRoutes(to: mobile)
    PhoneResetController(broker: broker, accounts: store, hasher: hasher, abuse: abuse, audit: audit).addRoutes(to: mobile)
    ApprovalsController(
        broker: broker, authenticator: authenticator, accounts: store, abuse: abuse, audit: audit, fraudSilence: configuration.fraudSilence
    ).addRoutes(to: mobile)
    HealthController(store: store, pushState: pushState).addRoutes(to: router)
    MetricsController(metrics: metrics, broker: broker).addRoutes(to: router)

    var application = Application(
        router: router,
        configuration: .init(address: .hostname(configuration.host, port: configuration.port), serverName: "countersign"),
        services: (push.map { [$0.clientService] } ?? []) + [
            ExpiryService(broker: broker, interval: .milliseconds(250), logger: logger),
            AuditWriter(log: audit, store: store, logger: logger),
            MaintenanceService(store: store, retention: configuration.retention, logger: logger),
            PushDispatcher(queue: pushQueue, accounts: store, sender: sender, audit: audit, metrics: metrics, logger: logger),
        ],
        onServerRunning: { channel in
            logger.info("listening", metadata: ["address": "\(channel.localAddress?.description ?? "?")"])
            let port = channel.localAddress?.port ?? configuration.port
            readyContinuation.yield(port)
            await onServerRunning(port)
        },
        logger: logger
    )
    application.beforeServerStarts {
        try await broker.start()
    }
    return CountersignServer(
        configuration: configuration,
        store: store,
        broker: broker,
        application: application,
        routes: router.routes.map { "\($0.method.rawValue) \($0.path)" },
        metrics: metrics,
        systemd: systemd
    )
}

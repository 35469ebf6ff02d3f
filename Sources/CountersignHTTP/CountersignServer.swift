import CountersignCore
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

    /// Answers every long poll, then lets the application's own services shut down.
    public var services: [any Service] {
        [application, BrokerDrainService(broker: broker)]
    }

    /// Runs until SIGTERM or SIGINT, then shuts down gracefully: long polls are
    /// answered at once, in-flight requests finish, the database is checkpointed.
    public func run(logger: Logger) async throws {
        let group = ServiceGroup(
            configuration: .init(services: services, gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
        )
        try await group.run()
        try store.checkpoint()
        logger.info("stopped")
    }
}

/// Builds the daemon from its configuration: opens and migrates the database,
/// loads live requests when the server starts, and routes the API.
///
/// - Parameters:
///   - pushSender: where pushes go; the default only logs them (push off).
///   - onServerRunning: called with the bound port once the listener is up.
public func buildServer(
    configuration: ServeConfiguration,
    logger: Logger,
    pushSender: (any PushSender)? = nil,
    onServerRunning: @escaping @Sendable (Int) async -> Void = { _ in }
) async throws -> CountersignServer {
    let store = try SQLiteStore(path: configuration.databasePath, logger: logger)
    let hasher = BcryptPasswordHasher(cost: configuration.bcryptCost)
    let pushQueue = PushQueue()
    let audit = AuditLog()
    let broker = ApprovalBroker(store: store, configuration: configuration.broker, pushQueue: pushQueue, audit: audit, logger: logger)
    let abuse = AbuseGuard(limits: RateLimits(configuration.rateLimits), audit: audit)
    let sender = pushSender ?? LoggingPushSender()
    let decoyHash = try await hasher.hash(SecureToken.apiKey())

    let router = Router(context: AppRequestContext.self)
    router.add(middleware: AccessLogMiddleware())
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
    HealthController(store: store, pushState: { pushSender == nil ? "disabled" : "ok" }).addRoutes(to: router)

    var application = Application(
        router: router,
        configuration: .init(address: .hostname(configuration.host, port: configuration.port), serverName: "countersign"),
        services: [
            ExpiryService(broker: broker, interval: .milliseconds(250), logger: logger),
            AuditWriter(log: audit, store: store, logger: logger),
            MaintenanceService(store: store, retention: configuration.retention, logger: logger),
            PushDispatcher(queue: pushQueue, accounts: store, sender: sender, audit: audit, logger: logger),
        ],
        onServerRunning: { channel in
            logger.info("listening", metadata: ["address": "\(channel.localAddress?.description ?? "?")"])
            await onServerRunning(channel.localAddress?.port ?? configuration.port)
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
        routes: router.routes.map { "\($0.method.rawValue) \($0.path)" }
    )
}

import CountersignCore
import CountersignServices
import Hummingbird
import Logging
import NIOCore
import ServiceLifecycle

/// The HTTP application: the router on its listener (and `/metrics` on its
/// own), run with the background services the runtime made.
///
/// - Parameters:
///   - clients: services the others use (the push, mail and webhook clients):
///     started first, stopped last, after the `/metrics` listener.
///   - services: the services to run with the server, in start order (they
///     stop in reverse): the expiry sweep, audit writer, push dispatch, outbox…
///   - onServerRunning: called with the bound port once the listener is up.
/// - Returns: the application, and every route as `METHOD /path/{parameter}`.
public func buildApplication(
    _ dependencies: AppDependencies,
    address: BindAddress,
    metricsAddress: BindAddress? = nil,
    onMetricsRunning: @escaping @Sendable (Int) async -> Void = { _ in },
    clients: [any Service] = [],
    services: [any Service] = [],
    logger: Logger,
    onServerRunning: @escaping @Sendable (Int) async -> Void = { _ in }
) -> (application: Application<RouterResponder<AppRequestContext>>, routes: [String]) {
    let router = buildRouter(dependencies)
    // `/metrics` has a listener of its own (loopback by default): its counters
    // move per account, so the public listener must not serve them.
    let metricsServer = metricsAddress.map { address in
        Application(
            router: buildMetricsRouter(dependencies),
            configuration: .init(address: address, serverName: "countersign-metrics"),
            onServerRunning: { channel in
                logger.info("metrics listening", metadata: ["address": "\(channel.localAddress?.description ?? "?")"])
                await onMetricsRunning(channel.localAddress?.port ?? 0)
            },
            logger: logger)
    }
    let application = Application(
        router: router,
        server: GuardedHTTP1Channel.builder(
            idleTimeout: dependencies.idleTimeout, requestTimeout: dependencies.requestTimeout,
            connections: ConnectionsPerAddress(
                cap: dependencies.connectionsPerAddress, trusted: dependencies.trustedProxies, metrics: dependencies.metrics)),
        // Thousands of long polls may connect at once; with the default queue of
        // 256 a burst overflows it, and the kernel drops connections that then
        // retry a second later. The kernel caps it at net.core.somaxconn.
        configuration: .init(address: address, serverName: "countersign", backlog: 4096),
        // `/metrics` answers until every background service has stopped: a last scrape sees their final counts.
        services: clients + (metricsServer.map { [$0] } ?? []) + services,
        onServerRunning: { channel in
            logger.info("listening", metadata: ["address": "\(channel.localAddress?.description ?? "?")"])
            await onServerRunning(channel.localAddress?.port ?? 0)
        },
        logger: logger
    )
    return (application, router.routes.map { "\($0.method.rawValue) \($0.path)" })
}

/// Every route of the API, behind the middleware chain.
public func buildRouter(_ dependencies: AppDependencies) -> Router<AppRequestContext> {
    let router = Router(context: AppRequestContext.self)
    // Middleware runs in the order listed, each wrapping the ones after it,
    // built as one stack of fixed types. Two, each doing several things: a
    // waiting long poll keeps an async frame per level.
    router.addMiddleware {
        // 1. the access log and the metrics see every request, with the final status;
        AccessLogMiddleware(metrics: dependencies.metrics)
        // 2. the client address is settled, a declared body over the limit
        //    refused, and from here out every failure becomes the contract's error body.
        RequestIntakeMiddleware(trusted: dependencies.trustedProxies)
    }

    let abuse = RateLimitGuard(limits: dependencies.rateLimits, metrics: dependencies.metrics, auditStore: dependencies.store)
    let authenticator = DeviceAuthenticator(accounts: dependencies.store)
    let arrivals = DeviceArrivals(
        accounts: dependencies.store, pushQueue: dependencies.pushQueue, audit: dependencies.audit, maxPerUser: dependencies.maxDevicesPerUser)
    let offline = OfflineSecrets(keys: dependencies.secretKeys, enabled: dependencies.offlineCodes)
    let codes = CodeAnswers(
        broker: dependencies.broker, store: dependencies.store, secrets: offline, deviceKeys: dependencies.deviceKeys, audit: dependencies.audit)
    let mobile = router.group("api/mobile")
    MobileAuthController(
        accounts: dependencies.store, hasher: dependencies.hasher, authenticator: authenticator, abuse: abuse, audit: dependencies.audit,
        decoyHash: dependencies.decoyHash, deviceKeys: dependencies.deviceKeys, arrivals: arrivals, offline: offline,
        pushEndpoints: dependencies.pushEndpoints, pushOffer: dependencies.pushSender.offer
    ).addRoutes(to: mobile)
    PhoneResetController(
        broker: dependencies.broker, hasher: dependencies.hasher, abuse: abuse, longPolls: dependencies.longPolls, codes: codes
    ).addRoutes(to: mobile)
    ApprovalsController(
        broker: dependencies.broker, authenticator: authenticator, abuse: abuse, audit: dependencies.audit, deviceKeys: dependencies.deviceKeys
    ).addRoutes(to: mobile)
    DeviceKeyController(
        accounts: dependencies.store, authenticator: authenticator, audit: dependencies.audit, deviceKeys: dependencies.deviceKeys, abuse: abuse
    ).addRoutes(to: mobile)
    EmailResetController(resets: dependencies.emailResets, abuse: abuse).addRoutes(to: mobile)
    EnrollmentController(
        store: dependencies.store, keys: dependencies.secretKeys, abuse: abuse, audit: dependencies.audit, deviceKeys: dependencies.deviceKeys,
        arrivals: arrivals, offline: offline, pushEndpoints: dependencies.pushEndpoints, pushOffer: dependencies.pushSender.offer
    ).addRoutes(to: mobile)
    // The approvals API of relying services, behind their own API keys.
    let integrations = IntegrationAuthenticator(integrations: dependencies.store)
    let v1 = router.group("v1")
    IntegrationUsersController(
        store: dependencies.store, authenticator: integrations, keys: dependencies.secretKeys, audit: dependencies.audit, abuse: abuse,
        publicURL: dependencies.publicURL
    ).addRoutes(to: v1)
    IntegrationApprovalsController(
        broker: dependencies.broker, store: dependencies.store, authenticator: integrations, abuse: abuse, longPolls: dependencies.longPolls,
        keys: dependencies.secretKeys, codes: codes
    ).addRoutes(to: v1)
    ResetPageController(resets: dependencies.emailResets, abuse: abuse).addRoutes(to: router)
    HealthController(store: dependencies.store, push: dependencies.pushSender, mail: dependencies.mail).addRoutes(to: router)
    return router
}

/// `GET /metrics` alone, for the metrics listener.
func buildMetricsRouter(_ dependencies: AppDependencies) -> Router<AppRequestContext> {
    let router = Router(context: AppRequestContext.self)
    MetricsController(
        metrics: dependencies.metrics, broker: dependencies.broker, pushQueue: dependencies.pushQueue, outbox: dependencies.store,
        longPolls: dependencies.longPolls
    ).addRoutes(to: router)
    return router
}

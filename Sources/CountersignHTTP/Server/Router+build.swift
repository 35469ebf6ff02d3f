import CountersignCore
import CountersignServices
import Hummingbird
import HummingbirdCore

/// HTTP/1.1 with the contract's connection limits (idle and request
/// deadlines, open connections per address) for the public listener, routing
/// with `router`. `open` counts its connections, for shutdown to wait on.
public func guardedHTTP1(_ dependencies: AppDependencies, router: Router<AppRequestContext>, open: OpenConnections) -> HTTPServerBuilder {
    GuardedHTTP1Channel.builder(
        responder: router.buildResponder(), idleTimeout: dependencies.idleTimeout, requestTimeout: dependencies.requestTimeout,
        connections: ConnectionsPerAddress(
            cap: dependencies.connectionsPerAddress, trusted: dependencies.trustedProxies, metrics: dependencies.metrics),
        open: open, accessLog: AccessLogMiddleware(metrics: dependencies.metrics))
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
    let offline = OfflineSecrets(keys: dependencies.secretKeys, enabled: dependencies.offlineCodes, issuer: dependencies.app.otpIssuer)
    let codes = CodeAnswers(
        broker: dependencies.broker, store: dependencies.store, secrets: offline, deviceKeys: dependencies.deviceKeys, audit: dependencies.audit,
        userBound: dependencies.rateLimits[.wrongCodesPerUserPerDay].limit, pushQueue: dependencies.pushQueue)
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
        store: dependencies.store, broker: dependencies.broker, authenticator: integrations, keys: dependencies.secretKeys, audit: dependencies.audit,
        abuse: abuse,
        publicURL: dependencies.publicURL, linkScheme: dependencies.app.linkScheme
    ).addRoutes(to: v1)
    IntegrationApprovalsController(
        broker: dependencies.broker, store: dependencies.store, authenticator: integrations, abuse: abuse, longPolls: dependencies.longPolls,
        keys: dependencies.secretKeys, codes: codes
    ).addRoutes(to: v1)
    WebhookController(
        store: dependencies.store, authenticator: integrations, audit: dependencies.audit, abuse: abuse, bell: dependencies.outboxBell
    )
    .addRoutes(to: v1)
    ResetPageController(resets: dependencies.emailResets, abuse: abuse).addRoutes(to: router)
    HealthController(store: dependencies.store, push: dependencies.pushSender, mail: dependencies.mail).addRoutes(to: router)
    return router
}

/// `GET /metrics` alone, for the metrics listener.
public func buildMetricsRouter(_ dependencies: AppDependencies) -> Router<AppRequestContext> {
    let router = Router(context: AppRequestContext.self)
    MetricsController(
        metrics: dependencies.metrics, broker: dependencies.broker, pushQueue: dependencies.pushQueue, outbox: dependencies.store,
        longPolls: dependencies.longPolls
    ).addRoutes(to: router)
    return router
}

import CountersignCore
import CountersignHTTP
import CountersignMail
import CountersignPush
import CountersignServices
import CountersignStore
import CountersignWebhooks
import Foundation
import Hummingbird
import Logging

/// Builds the daemon from its configuration: opens and migrates the database,
/// makes the broker and push, and the HTTP application over them. Live
/// requests are loaded when the server starts, before it listens.
///
/// - Parameters:
///   - pushSender: where pushes go; by default FCM when a service account is
///     configured, else a sender that only logs (push off).
///   - mailSender: where mail goes instead of the configured SMTP server (the demo prints it).
///   - environment: where `NOTIFY_SOCKET` and `WATCHDOG_USEC` are read (systemd).
///   - onServerRunning: called with the bound port once the listener is up.
///   - now: the clock of request lifetimes, email codes and rate-limit windows.
public func buildServer(
    configuration: ServeConfiguration,
    logger: Logger,
    pushSender: (any PushSender)? = nil,
    mailSender: (any MailSender)? = nil,
    environment: [String: String] = [:],
    onServerRunning: @escaping @Sendable (Int) async -> Void = { _ in },
    now: @escaping @Sendable () -> Date = { Date() }
) async throws -> CountersignServer {
    let database = try await configuration.database.open(
        nodeID: { configuration.nodeID ?? DatabaseLocation.defaultNodeID(port: configuration.port) }, logger: logger)
    let store = database.store
    if configuration.email.publicURL == nil {
        logger.warning(
            "no --public-url: enrollment and reset links point at the listen address; set it to the address users and devices reach",
            metadata: ["links": "\(configuration.listenURL)"])
    }
    // Every password check costs what the costliest stored hash costs, so that no user's login stands out.
    let stored = try await store.costliestPasswordHashCost()
    let hasher = BcryptPasswordHasher(cost: configuration.bcryptCost, maxQueued: configuration.bcryptQueue, checkCost: stored)
    logger.info(
        "password checks cost \(hasher.checkCost)",
        metadata: ["bcryptCost": "\(configuration.bcryptCost)", "costliestStored": "\(stored.map(String.init) ?? "none")"])
    let pushQueue = PushQueue()
    let audit = AuditLog()
    let metrics = AppMetrics()
    metrics.buildInfo()
    let bell = OutboxBell()
    let broker = ApprovalBroker(
        store: store, approvers: store, configuration: configuration.broker, pushQueue: pushQueue, audit: audit, logger: logger,
        outboxBell: bell, now: now, observer: { metrics.transition($0) })
    let push = pushSender == nil ? try await PushSetup.make(settings: configuration.push, deadTokens: store, logger: logger) : nil
    let sender: any PushSender = pushSender ?? push?.sender ?? LoggingPushSender()
    let email = try EmailSetup.make(
        configuration: configuration, store: store, hasher: hasher, audit: audit, bell: bell, mailSender: mailSender, environment: environment,
        now: now, broker: broker, logger: logger)
    // Webhooks of the approvals API: always on (an integration without a webhook queues nothing).
    let webhookClient = WebhookClient()
    var deliverers = email.deliverers
    deliverers[.webhook] = WebhookDeliverer(client: webhookClient, approvals: store, integrations: store)
    let dependencies = AppDependencies(
        store: store,
        broker: broker,
        hasher: hasher,
        pushQueue: pushQueue,
        pushSender: sender,
        audit: audit,
        metrics: metrics,
        // A cluster counts in the database, so that two nodes do not double a limit.
        rateLimits: LimitCounters(configuration.rateLimits, shared: database.sharedCounters, now: now),
        trustedProxies: configuration.trustedProxies,
        decoyHash: try await hasher.decoyHash(),
        emailResets: email.resets,
        mail: email.mailer,
        secretKeys: email.keys,
        publicURL: configuration.email.publicURL ?? configuration.listenURL,
        maxDevicesPerUser: configuration.maxDevicesPerUser,
        offlineCodes: configuration.offlineCodes,
        pushEndpoints: configuration.push.endpoints,
        deviceKeys: configuration.deviceKeys,
        longPolls: LongPollSlots(perAddress: configuration.longPollsPerAddress, total: configuration.longPollsTotal),
        idleTimeout: configuration.idleTimeout,
        requestTimeout: configuration.requestTimeout,
        connectionsPerAddress: configuration.connectionsPerAddress
    )

    let (readyPorts, readyContinuation) = AsyncStream.makeStream(of: Int.self)
    let systemd = SystemdNotifier(environment: environment).map { notifier in
        SystemdService(
            notifier: notifier,
            watchdog: SystemdNotifier.watchdogInterval(environment: environment),
            ready: readyPorts,
            broker: broker,
            store: store,
            push: sender,
            host: configuration.host,
            logger: logger
        )
    }
    let metricsPort = ListenerPort()
    var (application, routes) = buildApplication(
        dependencies,
        address: .hostname(configuration.host, port: configuration.port),
        metricsAddress: configuration.metricsListen.map { .hostname($0.host, port: $0.port) },
        onMetricsRunning: { metricsPort.set($0) },
        // In start order; they stop in reverse. The push client outlives the
        // dispatcher, the mail threads and the webhook client the outbox sender,
        // and the audit writer the rate-limit reporter, whose last reports it stores.
        clients: (push?.clientServices ?? []) + (email.mailService.map { [$0] } ?? []) + [webhookClient],
        services: [
            ExpiryService(broker: broker, interval: .milliseconds(250), logger: logger),
            AuditWriter(log: audit, store: store, logger: logger),
            MaintenanceService(store: store, retention: configuration.retention, logger: logger),
            PushDispatcher(queue: pushQueue, accounts: store, sender: sender, audit: audit, metrics: metrics, logger: logger),
            RefusalReporter(limits: dependencies.rateLimits, audit: audit, logger: logger),
        ]
            // Other nodes' transitions wake this node's long polls.
            + (database.changes.map { [ChangeFeedService(feed: $0, broker: broker)] } ?? [])
            + (deliverers.isEmpty
                ? [] : [OutboxService(store: store, deliverers: deliverers, bell: bell, audit: audit, metrics: metrics, logger: logger)]),
        logger: logger,
        onServerRunning: { port in
            readyContinuation.yield(port)
            await onServerRunning(port)
        }
    )
    application.beforeServerStarts {
        try await broker.start()
    }
    return CountersignServer(
        configuration: configuration,
        store: store,
        broker: broker,
        application: application,
        routes: routes,
        metrics: metrics,
        metricsPort: metricsPort,
        systemd: systemd
    )
}

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
import ServiceLifecycle

/// Builds the daemon from its configuration, the one place where its parts are
/// put together: the database, the password hasher, the broker, push, mail
/// and the email reset, webhooks, the background services in their start
/// order, systemd, and the HTTP application on its listeners. Live requests
/// are loaded when the server starts, before it listens.
///
/// - Parameters:
///   - pushSender: where pushes go; by default FCM when a service account is
///     configured, else a sender that only logs (push off).
///   - mailSender: where mail goes instead of the configured SMTP server (the demo prints it).
///   - environment: where `NOTIFY_SOCKET` and `WATCHDOG_USEC` are read (systemd).
///   - onServerRunning: called with the bound port once the listener is up.
///   - now: the clock of request lifetimes, email codes and rate-limit windows.
public func buildApplication(
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
    let push = pushSender == nil ? try await PushSetup.make(configuration: configuration.push, deadTokens: store, logger: logger) : nil
    let sender: any PushSender = pushSender ?? push?.sender ?? LoggingPushSender()
    let email = try EmailParts.make(
        configuration: configuration, store: store, hasher: hasher, audit: audit, bell: bell, mailSender: mailSender, environment: environment,
        now: now, broker: broker, logger: logger)
    // Webhooks of the approvals API: always on (an integration without a webhook queues nothing).
    let webhookClient = WebhookClient()
    var deliverers = email.deliverers
    deliverers[.webhook] = WebhookDeliverer(client: webhookClient, approvals: store, integrations: store)
    var dependencies = AppDependencies(
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
    dependencies.app = configuration.app
    dependencies.outboxBell = bell

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
    // `/metrics` has a listener of its own (loopback by default): its counters
    // move per account, so the public listener must not serve them.
    let metricsServer = configuration.metricsListen.map { listen in
        Application(
            router: buildMetricsRouter(dependencies),
            configuration: .init(address: .hostname(listen.host, port: listen.port), serverName: "countersign-metrics"),
            onServerRunning: { channel in
                logger.info("metrics listening", metadata: ["address": "\(channel.localAddress?.description ?? "?")"])
                metricsPort.set(channel.localAddress?.port ?? 0)
            },
            logger: logger)
    }
    // In start order; they stop in reverse. The push client outlives the
    // dispatcher, the mail threads and the webhook client the outbox sender,
    // and the audit writer the rate-limit reporter, whose last reports it stores.
    let clients: [any Service] = (push?.clientServices ?? []) + (email.mailService.map { [$0] } ?? []) + [webhookClient]
    let services: [any Service] =
        [
            ExpiryService(broker: broker, interval: .milliseconds(250), logger: logger),
            AuditWriter(log: audit, store: store, logger: logger),
            MaintenanceService(store: store, retention: configuration.retention, logger: logger),
            PushDispatcher(
                queue: pushQueue, accounts: store, sender: sender, audit: audit, metrics: metrics, logger: logger,
                maxPerHost: configuration.push.perHostInFlight),
            RefusalReporter(limits: dependencies.rateLimits, audit: audit, logger: logger),
        ]
        // Other nodes' transitions wake this node's long polls.
        + (database.changes.map { [ChangeFeedService(feed: $0, broker: broker)] } ?? [])
        + (deliverers.isEmpty
            ? [] : [OutboxService(store: store, deliverers: deliverers, bell: bell, audit: audit, metrics: metrics, logger: logger, now: now)])
    let router = buildRouter(dependencies)
    let connections = OpenConnections()
    var application = Application(
        router: router,
        server: guardedHTTP1(dependencies, router: router, open: connections),
        // Thousands of long polls may connect at once; with the default queue of
        // 256 a burst overflows it, and the kernel drops connections that then
        // retry a second later. The kernel caps it at net.core.somaxconn.
        configuration: .init(address: .hostname(configuration.host, port: configuration.port), serverName: "countersign", backlog: 4096),
        // `/metrics` answers until every background service has stopped: a last scrape sees their final counts.
        // Last: it stops first after the server, and waits for the connections still answering.
        services: clients + (metricsServer.map { [$0] } ?? []) + services + [ConnectionDrainService(connections: connections, logger: logger)],
        onServerRunning: { channel in
            let port = channel.localAddress?.port ?? 0
            logger.info("listening", metadata: ["address": "\(channel.localAddress?.description ?? "?")"])
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
        metricsPort: metricsPort,
        systemd: systemd
    )
}

/// The email reset as the daemon runs it: the secret key, the SMTP mailer
/// (when configured), the mail deliverer of the outbox, and ``EmailResets``.
private struct EmailParts {
    let resets: EmailResets
    let bell: OutboxBell
    /// `nil`: no mail sender; nothing is queued.
    let mailer: (any MailSender)?
    /// The SMTP mailer's thread pool, stopped after the outbox sender.
    let mailService: SMTPMailer?
    let deliverers: [OutboxKind: any OutboxDeliverer]
    /// The daemon's secret keys (also for enrollment codes and idempotent answers).
    let keys: SecretKeys

    static func make(
        configuration: ServeConfiguration, store: any CountersignStorage, hasher: any PasswordHasher, audit: AuditLog, bell: OutboxBell,
        mailSender: (any MailSender)?, environment: [String: String], now: @escaping @Sendable () -> Date = { Date() },
        broker: ApprovalBroker, logger: Logger
    ) throws -> EmailParts {
        let email = configuration.email
        let key = try configuration.secretKeyLocation(environment: environment)
        let keys = try SecretKeyFile.load(path: key.path, create: key.mayCreate, logger: logger)
        let smtp = mailSender == nil ? email.smtp.map(SMTPMailer.init(configuration:)) : nil
        let mailer: (any MailSender)? = mailSender ?? smtp
        var deliverers: [OutboxKind: any OutboxDeliverer] = [:]
        if let mailer {
            let templates = try MailTemplates(directory: email.templatesDirectory)
            let (link, usesListenAddress) = email.link(host: configuration.host, port: configuration.port)
            if let url = URL(string: link.link(token: "t", email: "e")), url.scheme == "http", let host = url.host, !NetworkHost.isLoopback(host) {
                logger.warning(
                    "reset links use plain http to a host that is not loopback: the token crosses the network in clear; use https in --public-url",
                    metadata: ["host": "\(host)"])
            }
            if usesListenAddress {
                logger.warning(
                    "reset links point at the listen address; set --public-url to the address users reach the daemon at",
                    metadata: ["link": "\(link.template)"])
            }
            deliverers[.mail] = ResetMailDeliverer(sender: mailer, templates: templates, link: link, keys: keys, codeTTL: email.codeTTL)
            logger.info("mail on", metadata: ["smtp": "\(email.smtp?.summary ?? "\(type(of: mailer))")"])
        } else {
            logger.notice("mail is off (no --smtp-url): email resets answer as usual, but no mail is queued or sent")
        }
        let resets = EmailResets(
            store: store, accounts: store, keys: keys, hasher: hasher, audit: audit, bell: bell,
            configuration: EmailResetConfiguration(codeTTL: email.codeTTL, mailEnabled: mailer != nil), now: now,
            onCancelledResets: { userID, cancelled, at, logger in
                await broker.passwordChanged(userID: userID, cancelled: cancelled, at: at, logger: logger)
            })
        return EmailParts(resets: resets, bell: bell, mailer: mailer, mailService: smtp, deliverers: deliverers, keys: keys)
    }
}

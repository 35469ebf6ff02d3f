import CountersignCore
import CountersignMail
import Foundation
import Logging

/// The email reset as the daemon runs it: the secret key, the SMTP mailer
/// (when configured), the mail deliverer of the outbox, and ``EmailResets``.
struct EmailSetup {
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
    ) throws -> EmailSetup {
        let settings = configuration.email
        let keyPath = settings.secretKeyPath(databasePath: configuration.databasePath, environment: environment)
        let credentialKey = environment["CREDENTIALS_DIRECTORY"].map { $0 + "/" + EmailSettings.secretKeyCredential }
        if configuration.database.isCluster, settings.secretKeyFile == nil, keyPath != credentialKey {
            // Enrollment codes, idempotent answers and email codes made on one node are checked on another.
            throw ConfigurationError(
                "with a PostgreSQL database every node needs the same secret key: give --secret-key-file (or the systemd credential secret-key)")
        }
        // Only the default place is created; a named file must exist.
        let keys = try SecretKeyFile.load(path: keyPath, create: settings.secretKeyFile == nil, logger: logger)
        let smtp = mailSender == nil ? settings.smtp.map(SMTPMailer.init(settings:)) : nil
        let mailer: (any MailSender)? = mailSender ?? smtp
        var deliverers: [OutboxKind: any OutboxDeliverer] = [:]
        if let mailer {
            let templates = try MailTemplates(directory: settings.templatesDirectory)
            let (link, usesListenAddress) = settings.link(host: configuration.host, port: configuration.port)
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
            deliverers[.mail] = ResetMailDeliverer(sender: mailer, templates: templates, link: link, keys: keys, codeTTL: settings.codeTTL)
            logger.info("mail on", metadata: ["smtp": "\(settings.smtp?.summary ?? "\(type(of: mailer))")"])
        } else {
            logger.notice("mail is off (no --smtp-url): email resets answer as usual, but no mail is queued or sent")
        }
        let resets = EmailResets(
            store: store, accounts: store, keys: keys, hasher: hasher, audit: audit, bell: bell,
            configuration: EmailResetConfiguration(codeTTL: settings.codeTTL, mailEnabled: mailer != nil), now: now,
            onCancelledResets: { userID, cancelled, at, logger in
                await broker.passwordChanged(userID: userID, cancelled: cancelled, at: at, logger: logger)
            })
        return EmailSetup(resets: resets, bell: bell, mailer: mailer, mailService: smtp, deliverers: deliverers, keys: keys)
    }
}

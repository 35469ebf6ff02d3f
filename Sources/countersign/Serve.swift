import ArgumentParser
import CountersignCore
import CountersignPush
import CountersignRuntime
import Foundation
import Logging

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Run the daemon.")

    typealias Setting = ConfigurationLoader

    @Option(help: "JSON config file (also COUNTERSIGN_CONFIG).") var config: String?
    @Option(name: .customLong(Setting.listen.longName), help: "Address to listen on, HOST:PORT (default 127.0.0.1:8080).")
    var listen: String?
    @Option(
        name: .customLong(Setting.metricsListen.longName),
        help: "Where /metrics is served, HOST:PORT, or off (default 127.0.0.1:9464); never on the public listener.")
    var metricsListen: String?
    @Option(
        name: .customLong(Setting.database.longName),
        help: """
            SQLite database file (default $STATE_DIRECTORY/countersign.sqlite, else ./countersign.sqlite), \
            or postgres://USER@HOST:PORT/DATABASE?sslmode=… for a cluster of nodes on one PostgreSQL database.
            """)
    var database: String?
    @Option(
        name: .customLong(Setting.databasePasswordFile.longName),
        help: "File holding the PostgreSQL password when the URL has none (default: the systemd credential database-password).")
    var databasePasswordFile: String?
    @Option(
        name: .customLong(Setting.databaseConnectionWait.longName),
        help: "PostgreSQL: seconds a query waits for a pooled connection before answering 503 (default 5).")
    var databaseConnectionWait: String?
    @Option(
        name: .customLong(Setting.databaseQueryLimit.longName),
        help: "PostgreSQL: seconds a query or transaction may run before its connection is closed and it answers 503 (default 30).")
    var databaseQueryLimit: String?
    @Option(name: .customLong(Setting.nodeID.longName), help: "This node's name in a cluster (default HOSTNAME:PORT).")
    var nodeID: String?
    @Option(name: .customLong(Setting.requestTTL.longName), help: "Seconds a request stays pending (default 60).")
    var requestTTL: String?
    @Option(
        name: .customLong(Setting.completionWindow.longName), help: "Seconds an approved request may wait for completion (default 120).")
    var completionWindow: String?
    @Option(name: .customLong(Setting.numberMatching.longName), help: "Number matching: required or off (default required).")
    var numberMatching: String?
    @Option(name: .customLong(Setting.bcryptCost.longName), help: "bcrypt cost, 4…31 (default 12).") var bcryptCost: String?
    @Option(
        name: .customLong(Setting.bcryptQueue.longName),
        help: "bcrypt jobs running or waiting at once; past it, 503 unavailable (default 32).")
    var bcryptQueue: String?
    @Option(
        name: .customLong(Setting.logLevel.longName),
        help: "Log level: trace, debug, info, notice, warning, error, critical (default info).")
    var logLevel: String?
    @Option(
        name: .customLong(Setting.logFormat.longName),
        help: "text (default; with priority prefixes and no timestamp when standard error is the journal) or json: one object a line.")
    var logFormat: String?
    @Option(name: .customLong(Setting.rateLimits.longName), help: "Override a rate limit, NAME=COUNT/SECONDS (repeatable).")
    var rateLimits: [String] = []
    @Option(
        name: .customLong(Setting.trustedProxies.longName), help: "A proxy whose X-Forwarded-For is believed, IP or CIDR (repeatable).")
    var trustedProxies: [String] = []
    @Option(name: .customLong(Setting.fraudSilence.longName), help: "Seconds a fraud report silences the user's prompts (default 3600).")
    var fraudSilence: String?
    @Option(name: .customLong(Setting.retention.longName), help: "Days audit events and finished requests are kept (default 90).")
    var auditRetentionDays: String?
    @Option(name: .customLong(Setting.idleTimeout.longName), help: "Seconds before an idle connection is closed (default 75).")
    var idleTimeout: String?
    @Option(
        name: .customLong(Setting.requestTimeout.longName),
        help: "Seconds a request (headers and body) may take to arrive after its first byte (default 30).")
    var requestTimeout: String?
    @Option(name: .customLong(Setting.headTimeout.longName), help: "The older name of --request-timeout.")
    var headerTimeout: String?
    @Option(name: .customLong(Setting.longPollsPerAddress.longName), help: "Long polls held at once per client address (default 1000).")
    var longPollsPerAddress: String?
    @Option(name: .customLong(Setting.longPollsTotal.longName), help: "Long polls held at once on this node (default 100000).")
    var longPollsMax: String?
    @Option(name: .customLong(Setting.maxDevicesPerUser.longName), help: "The most devices one user may have (default 20).")
    var maxDevicesPerUser: String?
    @Option(
        name: .customLong(Setting.connectionsPerAddress.longName),
        help: "Open connections per client address (per /64 for IPv6), 0 for no cap; trusted proxies are not capped (default 64).")
    var connectionsPerAddress: String?
    @OptionGroup var push: PushOptions
    @Option(
        name: .customLong(Setting.deviceKeys.longName),
        help: "Signed answers: off, optional (a device with a key must sign; default) or required (every answer signed).")
    var deviceKeys: String?
    @Option(
        name: .customLong(Setting.offlineCodes.longName),
        help: "Offline codes (TOTP on each trusted device, typed where the requester waits): on (default) or off.")
    var offlineCodes: String?
    @OptionGroup var mail: MailOptions
    @Option(
        name: .customLong(Setting.publicURL.longName),
        help: "The daemon's address as users reach it, for the reset link (default http:// and the listen address).")
    var publicURL: String?
    @Option(
        name: .customLong(Setting.resetLinkTemplate.longName),
        help: "Reset link with {token} and {email}, e.g. photosync://reset-password?token={token}&email={email} (default: the daemon's page).")
    var resetLinkTemplate: String?
    @Option(name: .customLong(Setting.emailCodeTTL.longName), help: "Seconds an email reset code and link work (default 900).")
    var emailCodeTTL: String?
    @Option(
        name: .customLong(Setting.mailTemplates.longName),
        help: "Folder with reset.txt.mustache and/or reset.html.mustache replacing the built-in mail.")
    var mailTemplates: String?
    @Option(
        name: .customLong(Setting.secretKeyFile.longName),
        help: "The daemon's secret key (≥ 32 bytes; default $CREDENTIALS_DIRECTORY/secret-key, else countersign.key beside the database).")
    var secretKeyFile: String?

    func run() async throws {
        let flags: [String: String?] = [
            Setting.listen.flag: listen, Setting.metricsListen.flag: metricsListen, Setting.database.flag: database,
            Setting.databasePasswordFile.flag: databasePasswordFile,
            Setting.nodeID.flag: nodeID, Setting.databaseConnectionWait.flag: databaseConnectionWait,
            Setting.databaseQueryLimit.flag: databaseQueryLimit, Setting.requestTTL.flag: requestTTL,
            Setting.completionWindow.flag: completionWindow, Setting.numberMatching.flag: numberMatching,
            Setting.bcryptCost.flag: bcryptCost, Setting.bcryptQueue.flag: bcryptQueue, Setting.logLevel.flag: logLevel,
            Setting.logFormat.flag: logFormat,
            Setting.fraudSilence.flag: fraudSilence,
            Setting.retention.flag: auditRetentionDays, Setting.idleTimeout.flag: idleTimeout, Setting.headTimeout.flag: headerTimeout,
            Setting.requestTimeout.flag: requestTimeout,
            Setting.longPollsPerAddress.flag: longPollsPerAddress, Setting.longPollsTotal.flag: longPollsMax,
            Setting.maxDevicesPerUser.flag: maxDevicesPerUser, Setting.connectionsPerAddress.flag: connectionsPerAddress,
            Setting.publicURL.flag: publicURL, Setting.resetLinkTemplate.flag: resetLinkTemplate, Setting.emailCodeTTL.flag: emailCodeTTL,
            Setting.mailTemplates.flag: mailTemplates, Setting.secretKeyFile.flag: secretKeyFile, Setting.deviceKeys.flag: deviceKeys,
            Setting.offlineCodes.flag: offlineCodes,
        ].merging(push.flags) { $1 }.merging(mail.flags) { $1 }
        let configuration = try await loadOrExit {
            try ConfigurationLoader(
                flags: flags.compactMapValues { $0 },
                lists: [Setting.rateLimits.flag: rateLimits, Setting.trustedProxies.flag: trustedProxies],
                environment: ProcessInfo.processInfo.environment,
                configFile: config
            ).serveConfiguration()
        }
        // Before the database is opened or migrated: a daemon that cannot listen changes nothing.
        try await loadOrExit {
            try await ListenCheck.ensureFree(ListenAddress(host: configuration.host, port: configuration.port), what: "--listen")
            if let metrics = configuration.metricsListen { try await ListenCheck.ensureFree(metrics, what: "--metrics-listen") }
        }
        let logger = bootstrapLogging(level: configuration.logLevel, format: configuration.logFormat)
        logger.info("starting", metadata: configuration.startupSummary)
        let server = try await loadOrExit {
            try await buildServer(configuration: configuration, logger: logger, environment: ProcessInfo.processInfo.environment)
        }
        try await server.run(logger: logger)
    }
}

/// Runs `body`; a configuration or start-up fault ends the process with one
/// clear line on standard error (exit 78, EX_CONFIG, for a bad setting).
func loadOrExit<T>(_ body: () async throws -> T) async throws -> T {
    do {
        return try await body()
    } catch let error as ConfigurationError {
        throw configurationFault(error.description)
    } catch let error as NewerDatabaseError {
        throw configurationFault(error.description)
    } catch let error as any CustomStringConvertible & Error {
        let journal = DaemonLogHandler.standardErrorIsJournal(environment: ProcessInfo.processInfo.environment)
        FileHandle.standardError.write(Data("\(journal ? "<3>" : "")countersign: \(error.description)\n".utf8))
        throw ExitCode.failure
    }
}

/// Says a configuration fault in one line on standard error (with the journal's
/// error priority when standard error is the journal) and gives exit status 78 (EX_CONFIG).
func configurationFault(_ message: String) -> ExitCode {
    let journal = DaemonLogHandler.standardErrorIsJournal(environment: ProcessInfo.processInfo.environment)
    FileHandle.standardError.write(Data("\(journal ? "<3>" : "")countersign: \(message)\n".utf8))
    return ExitCode(78)
}

func bootstrapLogging(level: Logger.Level, format: LogFormat = .text) -> Logger {
    let journal = DaemonLogHandler.standardErrorIsJournal(environment: ProcessInfo.processInfo.environment)
    LoggingSystem.bootstrap { label in DaemonLogHandler(label: label, level: level, format: format, journal: journal) }
    return Logger(label: "countersign")
}

import ArgumentParser
import CountersignRuntime

// The settings of `serve`, in the groups its --help shows. Each group hands
// its values to the configuration loader by flag name (`flags`).

struct ListenOptions: ParsableArguments {
    typealias Setting = ConfigurationLoader

    @Option(name: Setting.listen.name, help: Setting.listen.help("The API's address.", default: "127.0.0.1:8080", value: "host:port"))
    var listen: String?
    @Option(
        name: Setting.metricsListen.name,
        help: Setting.metricsListen.help(
            "Where /metrics is served, or off; never on the API's address.", default: "127.0.0.1:9464", value: "host:port"))
    var metricsListen: String?
    @Option(
        name: Setting.trustedProxies.name,
        help: Setting.trustedProxies.help("A proxy whose X-Forwarded-For is believed (repeatable).", value: "ip-or-cidr"))
    var trustedProxies: [String] = []
    @Option(
        name: Setting.connectionsPerAddress.name,
        help: Setting.connectionsPerAddress.help(
            "Open connections per client address (per /64 for IPv6), 0 for no cap; trusted proxies are not capped.", default: "64", value: "count"))
    var connectionsPerAddress: String?
    @Option(
        name: Setting.idleTimeout.name,
        help: Setting.idleTimeout.help("Seconds before an idle connection is closed.", default: "75", value: "seconds"))
    var idleTimeout: String?
    @Option(
        name: Setting.requestTimeout.name,
        help: Setting.requestTimeout.help(
            "Seconds a request (headers and body) may take to arrive after its first byte.", default: "30", value: "seconds"))
    var requestTimeout: String?
    @Option(name: Setting.headTimeout.name, help: Setting.headTimeout.help("The older name of --request-timeout.", value: "seconds"))
    var headerTimeout: String?
    @Option(
        name: Setting.longPollsPerAddress.name,
        help: Setting.longPollsPerAddress.help("Long polls held at once per client address.", default: "1000", value: "count"))
    var longPollsPerAddress: String?
    @Option(
        name: Setting.longPollsTotal.name,
        help: Setting.longPollsTotal.help("Long polls held at once on this node.", default: "100000", value: "count"))
    var longPollsMax: String?

    var flags: [String: String] {
        [
            Setting.listen.flag: listen, Setting.metricsListen.flag: metricsListen, Setting.connectionsPerAddress.flag: connectionsPerAddress,
            Setting.idleTimeout.flag: idleTimeout, Setting.requestTimeout.flag: requestTimeout, Setting.headTimeout.flag: headerTimeout,
            Setting.longPollsPerAddress.flag: longPollsPerAddress, Setting.longPollsTotal.flag: longPollsMax,
        ].compactMapValues { $0 }
    }
}

struct StorageOptions: ParsableArguments {
    typealias Setting = ConfigurationLoader

    @Option(
        name: Setting.database.name,
        help: Setting.database.help(
            """
            The SQLite database file, or postgres://USER@HOST:PORT/DATABASE?sslmode=… for a cluster of nodes on one PostgreSQL \
            database.
            """, default: "$STATE_DIRECTORY/countersign.sqlite, else ./countersign.sqlite", value: "file-or-url"))
    var database: String?
    @Option(
        name: Setting.databasePasswordFile.name,
        help: Setting.databasePasswordFile.help(
            "File holding the PostgreSQL password when the URL has none.", default: "$CREDENTIALS_DIRECTORY/database-password", value: "file"))
    var databasePasswordFile: String?
    @Option(
        name: Setting.databaseConnectionWait.name,
        help: Setting.databaseConnectionWait.help(
            "PostgreSQL: seconds a query waits for a pooled connection before answering 503.", default: "5", value: "seconds"))
    var databaseConnectionWait: String?
    @Option(
        name: Setting.databaseQueryLimit.name,
        help: Setting.databaseQueryLimit.help(
            "PostgreSQL: seconds a query or transaction may run before its connection is closed and it answers 503.", default: "30",
            value: "seconds"))
    var databaseQueryLimit: String?
    @Option(name: Setting.nodeID.name, help: Setting.nodeID.help("This node's name in a cluster.", default: "HOSTNAME:PORT", value: "name"))
    var nodeID: String?
    @Option(
        name: Setting.secretKeyFile.name,
        help: Setting.secretKeyFile.help(
            "The daemon's secret key, 32 bytes or more.", default: "$CREDENTIALS_DIRECTORY/secret-key, else countersign.key beside the database",
            value: "file"))
    var secretKeyFile: String?

    var flags: [String: String] {
        [
            Setting.database.flag: database, Setting.databasePasswordFile.flag: databasePasswordFile,
            Setting.databaseConnectionWait.flag: databaseConnectionWait, Setting.databaseQueryLimit.flag: databaseQueryLimit,
            Setting.nodeID.flag: nodeID, Setting.secretKeyFile.flag: secretKeyFile,
        ].compactMapValues { $0 }
    }
}

struct ApprovalOptions: ParsableArguments {
    typealias Setting = ConfigurationLoader

    @Option(name: Setting.requestTTL.name, help: Setting.requestTTL.help("Seconds a request stays pending.", default: "60", value: "seconds"))
    var requestTTL: String?
    @Option(
        name: Setting.completionWindow.name,
        help: Setting.completionWindow.help("Seconds an approved request may wait for completion.", default: "120", value: "seconds"))
    var completionWindow: String?
    @Option(
        name: Setting.numberMatching.name,
        help: Setting.numberMatching.help(
            "Number matching: the phone's user picks the code the requester shows.", default: "required", value: "required|off"))
    var numberMatching: String?
    @Option(
        name: Setting.deviceKeys.name,
        help: Setting.deviceKeys.help(
            "Signed answers: off, optional (a device with a key must sign) or required (every answer signed).", default: "optional",
            value: "off|optional|required"))
    var deviceKeys: String?
    @Option(
        name: Setting.offlineCodes.name,
        help: Setting.offlineCodes.help(
            "Offline codes: TOTP on each trusted device, typed where the requester waits.", default: "on", value: "on|off"))
    var offlineCodes: String?
    @Option(
        name: Setting.appLinkScheme.name,
        help: Setting.appLinkScheme.help(
            "The phone app's URI scheme, in enrollment links (SCHEME://enroll?url=…&code=…).", default: "countersign", value: "scheme"))
    var appLinkScheme: String?
    @Option(
        name: Setting.otpIssuer.name,
        help: Setting.otpIssuer.help("The issuer authenticator apps show for offline codes (otpauth:// URIs).", default: "Countersign", value: "name")
    )
    var otpIssuer: String?
    @Option(
        name: Setting.fraudSilence.name,
        help: Setting.fraudSilence.help("Seconds a fraud report silences the user's prompts.", default: "3600", value: "seconds"))
    var fraudSilence: String?
    @Option(
        name: Setting.maxDevicesPerUser.name,
        help: Setting.maxDevicesPerUser.help("The most devices one user may have.", default: "20", value: "count"))
    var maxDevicesPerUser: String?

    var flags: [String: String] {
        [
            Setting.requestTTL.flag: requestTTL, Setting.completionWindow.flag: completionWindow, Setting.numberMatching.flag: numberMatching,
            Setting.deviceKeys.flag: deviceKeys, Setting.offlineCodes.flag: offlineCodes, Setting.fraudSilence.flag: fraudSilence,
            Setting.maxDevicesPerUser.flag: maxDevicesPerUser, Setting.appLinkScheme.flag: appLinkScheme, Setting.otpIssuer.flag: otpIssuer,
        ].compactMapValues { $0 }
    }
}

struct LimitOptions: ParsableArguments {
    typealias Setting = ConfigurationLoader

    @Option(name: Setting.bcryptCost.name, help: Setting.bcryptCost.help("bcrypt cost, 4…31.", default: "12", value: "cost"))
    var bcryptCost: String?
    @Option(
        name: Setting.bcryptQueue.name,
        help: Setting.bcryptQueue.help("bcrypt jobs running or waiting at once; past it, 503 unavailable.", default: "32", value: "count"))
    var bcryptQueue: String?
    @Option(
        name: Setting.rateLimits.name,
        help: Setting.rateLimits.help("Override one rate limit: at most COUNT per SECONDS (repeatable).", value: "name=count/seconds"))
    var rateLimits: [String] = []

    var flags: [String: String] {
        [Setting.bcryptCost.flag: bcryptCost, Setting.bcryptQueue.flag: bcryptQueue].compactMapValues { $0 }
    }
}

struct LogOptions: ParsableArguments {
    typealias Setting = ConfigurationLoader

    @Option(
        name: Setting.logLevel.name,
        help: Setting.logLevel.help("Log level: trace, debug, info, notice, warning, error or critical.", default: "info", value: "level"))
    var logLevel: String?
    @Option(
        name: Setting.logFormat.name,
        help: Setting.logFormat.help(
            "text (with priority prefixes and no timestamp when standard error is the journal) or json (one object a line).", default: "text",
            value: "text|json"))
    var logFormat: String?
    @Option(
        name: Setting.retention.name,
        help: Setting.retention.help("Days audit events and finished requests are kept.", default: "90", value: "days"))
    var auditRetentionDays: String?

    var flags: [String: String] {
        [Setting.logLevel.flag: logLevel, Setting.logFormat.flag: logFormat, Setting.retention.flag: auditRetentionDays].compactMapValues { $0 }
    }
}

struct EmailResetOptions: ParsableArguments {
    typealias Setting = ConfigurationLoader

    @Option(
        name: Setting.publicURL.name,
        help: Setting.publicURL.help(
            "The daemon's address as users reach it, for the reset link.", default: "http:// and the listen address", value: "url"))
    var publicURL: String?
    @Option(
        name: Setting.resetLinkTemplate.name,
        help: Setting.resetLinkTemplate.help(
            "The reset link, with {token} and {email}: photosync://reset-password?token={token}&email={email}, say.", default: "the daemon's page",
            value: "template"))
    var resetLinkTemplate: String?
    @Option(
        name: Setting.emailCodeTTL.name,
        help: Setting.emailCodeTTL.help("Seconds an email reset code and link work.", default: "900", value: "seconds"))
    var emailCodeTTL: String?
    @Option(
        name: Setting.mailTemplates.name,
        help: Setting.mailTemplates.help(
            "A folder with reset.txt.mustache and/or reset.html.mustache, replacing the built-in mail.", default: "the built-in mail", value: "folder"
        ))
    var mailTemplates: String?

    var flags: [String: String] {
        [
            Setting.publicURL.flag: publicURL, Setting.resetLinkTemplate.flag: resetLinkTemplate, Setting.emailCodeTTL.flag: emailCodeTTL,
            Setting.mailTemplates.flag: mailTemplates,
        ].compactMapValues { $0 }
    }
}

import Configuration
import CountersignCore
import CountersignHTTP
import CountersignMail
import CountersignPostgres
import CountersignPush
import Foundation
import Logging
import Synchronization

/// Merges settings with the precedence flag > environment (`COUNTERSIGN_*`) > config file > default.
public struct ConfigurationLoader {
    /// One setting: its flag, its environment variable and its config-file key.
    public struct Setting: Sendable {
        public var flag: String
        public var environment: String
        public var fileKey: String
        /// A value that may hold a password (a database or SMTP URL): marked secret for swift-configuration
        /// and never repeated in a refusal.
        public var isSecret = false

        /// The setting's key for the configuration reader: its config-file key (`fcm.endpoint`).
        var readKey: ConfigKey { ConfigKey(fileKey) }
        var configKey: AbsoluteConfigKey { AbsoluteConfigKey(readKey) }

        /// The flag without its dashes, as a command-line parser names it (`listen`).
        public var longName: String { String(flag.drop { $0 == "-" }) }
    }

    public static let listen = Setting(flag: "--listen", environment: "COUNTERSIGN_LISTEN", fileKey: "listen")
    public static let metricsListen = Setting(flag: "--metrics-listen", environment: "COUNTERSIGN_METRICS_LISTEN", fileKey: "metricsListen")
    public static let database = Setting(flag: "--database", environment: "COUNTERSIGN_DATABASE", fileKey: "database", isSecret: true)
    public static let databasePasswordFile = Setting(
        flag: "--database-password-file", environment: "COUNTERSIGN_DATABASE_PASSWORD_FILE", fileKey: "databasePasswordFile")
    public static let nodeID = Setting(flag: "--node-id", environment: "COUNTERSIGN_NODE_ID", fileKey: "nodeID")
    public static let databaseConnectionWait = Setting(
        flag: "--database-connection-wait", environment: "COUNTERSIGN_DATABASE_CONNECTION_WAIT", fileKey: "databaseConnectionWait")
    public static let databaseQueryLimit = Setting(
        flag: "--database-query-limit", environment: "COUNTERSIGN_DATABASE_QUERY_LIMIT", fileKey: "databaseQueryLimit")
    public static let requestTTL = Setting(flag: "--request-ttl", environment: "COUNTERSIGN_REQUEST_TTL", fileKey: "requestTTL")
    public static let completionWindow = Setting(
        flag: "--completion-window", environment: "COUNTERSIGN_COMPLETION_WINDOW", fileKey: "completionWindow")
    public static let numberMatching = Setting(
        flag: "--number-matching", environment: "COUNTERSIGN_NUMBER_MATCHING", fileKey: "numberMatching")
    public static let bcryptCost = Setting(flag: "--bcrypt-cost", environment: "COUNTERSIGN_BCRYPT_COST", fileKey: "bcryptCost")
    public static let bcryptQueue = Setting(flag: "--bcrypt-queue", environment: "COUNTERSIGN_BCRYPT_QUEUE", fileKey: "bcryptQueue")
    public static let logLevel = Setting(flag: "--log-level", environment: "COUNTERSIGN_LOG_LEVEL", fileKey: "logLevel")
    public static let logFormat = Setting(flag: "--log-format", environment: "COUNTERSIGN_LOG_FORMAT", fileKey: "logFormat")
    public static let fraudSilence = Setting(flag: "--fraud-silence", environment: "COUNTERSIGN_FRAUD_SILENCE", fileKey: "fraudSilence")
    public static let retention = Setting(
        flag: "--audit-retention-days", environment: "COUNTERSIGN_AUDIT_RETENTION_DAYS", fileKey: "auditRetentionDays")
    /// Repeatable: `--rate-limit NAME=COUNT/SECONDS`; environment `NAME=COUNT/SECONDS,…`; file `{"NAME": {"count": C, "window": S}}`.
    public static let rateLimits = Setting(flag: "--rate-limit", environment: "COUNTERSIGN_RATE_LIMITS", fileKey: "rateLimits")
    /// Repeatable: `--trusted-proxy CIDR`; environment `CIDR,…`; file `["CIDR", …]`.
    public static let trustedProxies = Setting(
        flag: "--trusted-proxy", environment: "COUNTERSIGN_TRUSTED_PROXIES", fileKey: "trustedProxies")
    public static let idleTimeout = Setting(flag: "--idle-timeout", environment: "COUNTERSIGN_IDLE_TIMEOUT", fileKey: "idleTimeout")
    public static let requestTimeout = Setting(
        flag: "--request-timeout", environment: "COUNTERSIGN_REQUEST_TIMEOUT", fileKey: "requestTimeout")
    /// The older name of ``requestTimeout``, still read (the request timeout wins when both are set).
    public static let headTimeout = Setting(flag: "--header-timeout", environment: "COUNTERSIGN_HEADER_TIMEOUT", fileKey: "headerTimeout")
    public static let longPollsPerAddress = Setting(
        flag: "--long-polls-per-address", environment: "COUNTERSIGN_LONG_POLLS_PER_ADDRESS", fileKey: "longPollsPerAddress")
    public static let connectionsPerAddress = Setting(
        flag: "--connections-per-address", environment: "COUNTERSIGN_CONNECTIONS_PER_ADDRESS", fileKey: "connectionsPerAddress")
    public static let maxDevicesPerUser = Setting(
        flag: "--max-devices-per-user", environment: "COUNTERSIGN_MAX_DEVICES_PER_USER", fileKey: "maxDevicesPerUser")
    public static let longPollsTotal = Setting(flag: "--long-polls-max", environment: "COUNTERSIGN_LONG_POLLS_MAX", fileKey: "longPollsMax")
    public static let fcmServiceAccount = Setting(
        flag: "--fcm-service-account", environment: "COUNTERSIGN_FCM_SERVICE_ACCOUNT", fileKey: "fcm.serviceAccountFile")
    public static let fcmEndpoint = Setting(flag: "--fcm-endpoint", environment: "COUNTERSIGN_FCM_ENDPOINT", fileKey: "fcm.endpoint")
    public static let fcmCAFile = Setting(flag: "--fcm-ca-file", environment: "COUNTERSIGN_FCM_CA_FILE", fileKey: "fcm.caFile")
    public static let apnsKeyFile = Setting(flag: "--apns-key-file", environment: "COUNTERSIGN_APNS_KEY_FILE", fileKey: "apns.keyFile")
    public static let apnsKeyID = Setting(flag: "--apns-key-id", environment: "COUNTERSIGN_APNS_KEY_ID", fileKey: "apns.keyID")
    public static let apnsTeamID = Setting(flag: "--apns-team-id", environment: "COUNTERSIGN_APNS_TEAM_ID", fileKey: "apns.teamID")
    public static let apnsURL = Setting(flag: "--apns-url", environment: "COUNTERSIGN_APNS_URL", fileKey: "apns.url")
    public static let apnsCAFile = Setting(flag: "--apns-ca-file", environment: "COUNTERSIGN_APNS_CA_FILE", fileKey: "apns.caFile")
    public static let vapidKeyFile = Setting(flag: "--vapid-key-file", environment: "COUNTERSIGN_VAPID_KEY_FILE", fileKey: "webpush.vapidKeyFile")
    public static let vapidSubject = Setting(flag: "--vapid-subject", environment: "COUNTERSIGN_VAPID_SUBJECT", fileKey: "webpush.vapidSubject")
    public static let pushAllowPrivateEndpoints = Setting(
        flag: "--push-allow-private-endpoints", environment: "COUNTERSIGN_PUSH_ALLOW_PRIVATE_ENDPOINTS", fileKey: "pushAllowPrivateEndpoints")
    public static let pushPerHostInFlight = Setting(
        flag: "--push-per-host-in-flight", environment: "COUNTERSIGN_PUSH_PER_HOST_IN_FLIGHT", fileKey: "pushPerHostInFlight")
    public static let sealedPush = Setting(flag: "--sealed-push", environment: "COUNTERSIGN_SEALED_PUSH", fileKey: "sealedPush")
    public static let smtpURL = Setting(flag: "--smtp-url", environment: "COUNTERSIGN_SMTP_URL", fileKey: "smtp.url", isSecret: true)
    public static let smtpUser = Setting(flag: "--smtp-user", environment: "COUNTERSIGN_SMTP_USER", fileKey: "smtp.user")
    public static let smtpPasswordFile = Setting(
        flag: "--smtp-password-file", environment: "COUNTERSIGN_SMTP_PASSWORD_FILE", fileKey: "smtp.passwordFile")
    public static let smtpFrom = Setting(flag: "--smtp-from", environment: "COUNTERSIGN_SMTP_FROM", fileKey: "smtp.from")
    public static let smtpTLS = Setting(flag: "--smtp-tls", environment: "COUNTERSIGN_SMTP_TLS", fileKey: "smtp.tls")
    public static let smtpCAFile = Setting(flag: "--smtp-ca-file", environment: "COUNTERSIGN_SMTP_CA_FILE", fileKey: "smtp.caFile")
    public static let publicURL = Setting(flag: "--public-url", environment: "COUNTERSIGN_PUBLIC_URL", fileKey: "publicURL")
    public static let resetLinkTemplate = Setting(
        flag: "--reset-link-template", environment: "COUNTERSIGN_RESET_LINK_TEMPLATE", fileKey: "resetLinkTemplate")
    public static let emailCodeTTL = Setting(flag: "--email-code-ttl", environment: "COUNTERSIGN_EMAIL_CODE_TTL", fileKey: "emailCodeTTL")
    public static let mailTemplates = Setting(flag: "--mail-templates", environment: "COUNTERSIGN_MAIL_TEMPLATES", fileKey: "mailTemplates")
    public static let secretKeyFile = Setting(flag: "--secret-key-file", environment: "COUNTERSIGN_SECRET_KEY_FILE", fileKey: "secretKeyFile")
    public static let deviceKeys = Setting(flag: "--device-keys", environment: "COUNTERSIGN_DEVICE_KEYS", fileKey: "deviceKeys")
    public static let offlineCodes = Setting(flag: "--offline-codes", environment: "COUNTERSIGN_OFFLINE_CODES", fileKey: "offlineCodes")
    public static let appLinkScheme = Setting(flag: "--app-link-scheme", environment: "COUNTERSIGN_APP_LINK_SCHEME", fileKey: "appLinkScheme")
    public static let otpIssuer = Setting(flag: "--otp-issuer", environment: "COUNTERSIGN_OTP_ISSUER", fileKey: "otpIssuer")
    public static let all = [
        listen, metricsListen, database, databasePasswordFile, nodeID, databaseConnectionWait, databaseQueryLimit, requestTTL, completionWindow,
        numberMatching,
        bcryptCost, bcryptQueue, logLevel, logFormat, fraudSilence,
        retention,
        rateLimits, trustedProxies, idleTimeout, requestTimeout, headTimeout, longPollsPerAddress, longPollsTotal, maxDevicesPerUser,
        connectionsPerAddress, fcmServiceAccount, fcmEndpoint,
        fcmCAFile, apnsKeyFile, apnsKeyID, apnsTeamID, apnsURL, apnsCAFile, vapidKeyFile, vapidSubject, pushAllowPrivateEndpoints,
        pushPerHostInFlight, sealedPush, smtpURL, smtpUser,
        smtpPasswordFile, smtpFrom, smtpTLS, smtpCAFile, publicURL, resetLinkTemplate, emailCodeTTL,
        mailTemplates, secretKeyFile, deviceKeys, offlineCodes, appLinkScheme, otpIssuer,
    ]

    /// The settings as swift-configuration reads them: the command line, then the environment, then the config file.
    let reader: ConfigReader
    /// Which provider answered each read, so that a refusal can name where the bad value came from.
    let answers: AnsweringProviders
    let commandLine: InMemoryProvider
    let environmentVariables: KeyMappingProvider<EnvironmentVariablesProvider>
    let file: InMemoryProvider
    /// Values of the config file that cannot be what their key wants, by key: refused when that setting is
    /// read from the file (an operator command that does not read it still runs).
    let fileProblems: [String: ConfigurationError]
    let environment: [String: String]
    let filePath: String?

    /// - Parameters:
    ///   - flags: values given on the command line, by flag name (`"--listen"`).
    ///   - configFile: the JSON config file, when given (flag, then `COUNTERSIGN_CONFIG`).
    ///   - lists: repeatable flags, by flag name (`"--rate-limit"`).
    public init(flags: [String: String], lists: [String: [String]] = [:], environment: [String: String], configFile: String?) throws {
        self.environment = environment
        self.filePath = configFile ?? environment["COUNTERSIGN_CONFIG"]
        var given: [AbsoluteConfigKey: ConfigValue] = [:]
        for setting in Self.all {
            if let value = flags[setting.flag] {
                given[setting.configKey] = ConfigValue(.string(value), isSecret: setting.isSecret)
            } else if let values = lists[setting.flag], !values.isEmpty {
                given[setting.configKey] = ConfigValue(.stringArray(values), isSecret: setting.isSecret)
            }
        }
        self.commandLine = InMemoryProvider(name: "command line", values: given)
        // The environment's names are the daemon's own (COUNTERSIGN_REQUEST_TTL), not the key's default spelling (REQUEST_TTL).
        let environmentNames = Dictionary(uniqueKeysWithValues: Self.all.map { ($0.configKey, AbsoluteConfigKey([$0.environment])) })
        self.environmentVariables = KeyMappingProvider(
            upstream: EnvironmentVariablesProvider(
                environmentVariables: environment, secretsSpecifier: .specific(Set(Self.all.filter(\.isSecret).map(\.environment)))),
            keyMapper: { key in environmentNames[key] ?? AbsoluteConfigKey(["COUNTERSIGN_UNKNOWN"] + key.components) })
        let (fileValues, fileProblems) = try filePath.map(Self.fileValues) ?? ([:], [:])
        self.file = InMemoryProvider(name: filePath ?? "config file", values: fileValues)
        self.fileProblems = fileProblems
        self.answers = AnsweringProviders()
        self.reader = ConfigReader(providers: [commandLine, environmentVariables, file], accessReporter: answers)
    }

    /// The config file's settings as configuration values: nested objects (`"fcm": {...}`) become dotted keys
    /// (`fcm.endpoint`), numbers and booleans their text (parsed as a flag's value is), and `rateLimits` a list of
    /// `NAME=COUNT/SECONDS` as the flag takes them. An unknown key refuses the file; a value of the wrong shape
    /// is a problem of its setting, said when the setting is read.
    static func fileValues(path: String) throws -> ([AbsoluteConfigKey: ConfigValue], [String: ConfigurationError]) {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw ConfigurationError("cannot read config file \(path)")
        }
        guard let json = ConfigFileText.strictJSON(data), let object = try? JSONSerialization.jsonObject(with: json) as? [String: Any] else {
            throw ConfigurationError("config file \(path) is not a JSON object (comments and trailing commas are allowed)")
        }
        var flat: [String: Any] = [:]
        for (key, value) in object {
            if ["fcm", "smtp", "apns", "webpush"].contains(key), let nested = value as? [String: Any] {
                for (inner, innerValue) in nested { flat["\(key).\(inner)"] = innerValue }
            } else {
                flat[key] = value
            }
        }
        let settings = Dictionary(uniqueKeysWithValues: Self.all.map { ($0.fileKey, $0) })
        if let unknown = flat.keys.sorted().first(where: { settings[$0] == nil }) {
            throw ConfigurationError(
                "config file \(path): unknown key \"\(unknown)\" (known: \(settings.keys.sorted().joined(separator: ", ")))")
        }
        var values: [AbsoluteConfigKey: ConfigValue] = [:]
        var problems: [String: ConfigurationError] = [:]
        for (key, value) in flat {
            guard let setting = settings[key] else { continue }
            let source = "\(path): \(key)"
            do {
                let content: ConfigContent
                switch key {
                case Self.rateLimits.fileKey:
                    content = .stringArray(try Self.fileRateLimits(value, source: source))
                case Self.trustedProxies.fileKey:
                    guard let array = value as? [String] else { throw ConfigurationError("\(source) must be an array of CIDR strings") }
                    content = .stringArray(array)
                default:
                    if let text = value as? String {
                        content = .string(text)
                    } else if let number = value as? NSNumber {
                        content = .string(number.stringValue)
                    } else {
                        throw ConfigurationError("\(source) must be a string, a number or a boolean")
                    }
                }
                values[setting.configKey] = ConfigValue(content, isSecret: setting.isSecret)
            } catch let problem as ConfigurationError {
                problems[key] = problem
            }
        }
        return (values, problems)
    }

    /// `{"NAME": {"count": C, "window": S}, …}` as `["NAME=C/S", …]`.
    static func fileRateLimits(_ value: Any, source: String) throws -> [String] {
        guard let entries = value as? [String: Any] else { throw ConfigurationError("\(source) must be an object") }
        return try entries.keys.sorted().map { key in
            _ = try Self.limitName(key, source: source)
            guard let fields = entries[key] as? [String: Any], let count = (fields["count"] as? NSNumber)?.intValue,
                let window = (fields["window"] as? NSNumber)?.intValue, count > 0, (1...86400).contains(window)
            else {
                throw ConfigurationError("\(source).\(key) must be {\"count\": N, \"window\": SECONDS} with N ≥ 1 and 1…86400 seconds")
            }
            return "\(key)=\(count)/\(window)"
        }
    }

    /// Where a value came from, as the operator wrote it: the flag, the environment variable, or the file and its key.
    func source(of setting: Setting, providerName: String?) -> String {
        switch providerName {
        case commandLine.providerName: setting.flag
        case environmentVariables.providerName: setting.environment
        default: "\(filePath ?? "config file"): \(setting.fileKey)"
        }
    }

    /// The raw value of a setting and where it came from, or `nil` when unset.
    func raw(_ setting: Setting) throws -> (value: String, source: String)? {
        let value = reader.string(forKey: setting.readKey, isSecret: setting.isSecret)
        try answers.check(setting.configKey, reading: setting.flag)
        guard let value else {
            // Set in the file, but not as a value of its kind (and not overridden).
            if let problem = fileProblems[setting.fileKey] { throw problem }
            return nil
        }
        return (value, source(of: setting, providerName: answers.provider(of: setting.configKey)))
    }

    static func parseNodeID(_ value: String) -> String? {
        (1...100).contains(value.count) && value.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || "-_.:".contains($0)) }
            ? value : nil
    }

    func value<T>(_ setting: Setting, expected: String, parse: (String) -> T?) throws -> T? {
        guard let (raw, source) = try raw(setting) else { return nil }
        guard let value = parse(raw.trimmingCharacters(in: .whitespaces)) else {
            // A secret (a database URL may hold its password) is not repeated where the journal keeps it.
            let shown = setting.isSecret ? "" : "\"\(raw)\" "
            throw ConfigurationError("invalid value \(shown)for \(source): expected \(expected)")
        }
        return value
    }

    /// `--log-format`, when set: read first, so that even a refusal of the other settings is written as the log is.
    public func logFormat() throws -> LogFormat? {
        try value(Self.logFormat, expected: "text or json", parse: { LogFormat(rawValue: $0.lowercased()) })
    }

    public func databasePath() throws -> String {
        try value(Self.database, expected: "a file path or a postgres:// URL", parse: { $0.isEmpty ? nil : $0 })
            ?? ServeConfiguration.defaultDatabasePath(environment: environment)
    }

    /// The database (`--database`, with `--database-password-file` or the `database-password` credential for PostgreSQL).
    public func database() throws -> DatabaseLocation {
        let path = try databasePath()
        guard PostgresConfiguration.isURL(path) else { return .sqlite(path: path) }
        let seconds = "whole seconds from 1 to 86400"
        return try DatabaseLocation.postgres(
            url: path, password: try secret(Self.databasePasswordFile, credential: DatabaseLocation.passwordCredential, what: "database password"),
            connectionWait: try value(Self.databaseConnectionWait, expected: seconds, parse: Self.parseSeconds).map { .seconds($0) },
            queryLimit: try value(Self.databaseQueryLimit, expected: seconds, parse: Self.parseSeconds).map { .seconds($0) })
    }

    /// The daemon's secret key, as `serve` finds it (the operator's commands
    /// that hash codes need the same key). Never created here: a key made by
    /// a command run as another user than the daemon's would lock it out.
    public func secretKeys(logger: Logger) throws -> SecretKeys {
        let path = try secretKeyPath()
        guard FileManager.default.fileExists(atPath: path) else {
            throw ConfigurationError(
                "no secret key at \(path): start the daemon once (it creates it there) or give --secret-key-file")
        }
        return try SecretKeyFile.load(path: path, create: false, logger: logger)
    }

    /// Where `serve` finds its secret key: `--secret-key-file`, the credential, or beside the database.
    public func secretKeyPath() throws -> String {
        let file = try value(Self.secretKeyFile, expected: "a file path", parse: { $0.isEmpty ? nil : $0 })
        let database = try databasePath()
        if file == nil, PostgresConfiguration.isURL(database), environment["CREDENTIALS_DIRECTORY"] == nil {
            throw ConfigurationError("with a PostgreSQL database, give the nodes' secret key: --secret-key-file")
        }
        var settings = EmailConfiguration()
        settings.secretKeyFile = file
        return settings.secretKeyPath(databasePath: database, environment: environment)
    }

    /// The bcrypt cost alone (the user commands need nothing else).
    public func bcryptCost() throws -> Int {
        let costs = BcryptPasswordHasher.costRange
        return try value(
            Self.bcryptCost, expected: "a whole number from \(costs.lowerBound) to \(costs.upperBound)",
            parse: {
                Int($0).flatMap { costs.contains($0) ? $0 : nil }
            }) ?? ServeConfiguration(databasePath: "").bcryptCost
    }

    public func serveConfiguration() throws -> ServeConfiguration {
        var configuration = ServeConfiguration(databasePath: try databasePath())
        configuration.database = try database()
        configuration.nodeID = try value(Self.nodeID, expected: "1 to 100 letters, digits or - _ . :", parse: Self.parseNodeID)
        if let (host, port) = try value(Self.listen, expected: "HOST:PORT, e.g. 127.0.0.1:8080", parse: Self.parseListen) {
            configuration.host = host
            configuration.port = port
        }
        if let metrics = try value(
            Self.metricsListen, expected: "HOST:PORT (e.g. 127.0.0.1:9464) or off",
            parse: { $0 == "off" ? ListenAddress(host: "", port: -1) : Self.parseListen($0).map { ListenAddress(host: $0.0, port: $0.1) } })
        {
            configuration.metricsListen = metrics.port < 0 ? nil : metrics
        }
        let seconds = "whole seconds from 1 to 86400"
        if let ttl = try value(Self.requestTTL, expected: seconds, parse: Self.parseSeconds) {
            configuration.broker.requestTTL = ttl
        }
        if let window = try value(Self.completionWindow, expected: seconds, parse: Self.parseSeconds) {
            configuration.broker.completionWindow = window
        }
        if let matching = try value(Self.numberMatching, expected: "required or off", parse: Self.parseNumberMatching) {
            configuration.broker.numberMatching = matching
        }
        configuration.bcryptCost = try bcryptCost()
        if let queue = try value(
            Self.bcryptQueue, expected: "a whole number from 1 to 10000", parse: { Int($0).flatMap { (1...10000).contains($0) ? $0 : nil } })
        {
            configuration.bcryptQueue = queue
        }
        if let level = try value(
            Self.logLevel, expected: "trace, debug, info, notice, warning, error or critical",
            parse: {
                Logger.Level(rawValue: $0.lowercased())
            })
        {
            configuration.logLevel = level
        }
        if let format = try logFormat() {
            configuration.logFormat = format
        }
        if let silence = try value(
            Self.fraudSilence, expected: "whole seconds from 1 to 604800",
            parse: {
                Int($0).flatMap { (1...604_800).contains($0) ? TimeInterval($0) : nil }
            })
        {
            configuration.fraudSilence = silence
        }
        if let days = try value(
            Self.retention, expected: "whole days from 1 to 3650",
            parse: {
                Int($0).flatMap { (1...3650).contains($0) ? TimeInterval($0) * 86400 : nil }
            })
        {
            configuration.retention = days
        }
        if let idle = try value(Self.idleTimeout, expected: seconds, parse: Self.parseSeconds) {
            configuration.idleTimeout = .seconds(idle)
        }
        if let head = try value(Self.headTimeout, expected: seconds, parse: Self.parseSeconds) {
            configuration.requestTimeout = .seconds(head)
        }
        if let request = try value(Self.requestTimeout, expected: seconds, parse: Self.parseSeconds) {
            configuration.requestTimeout = .seconds(request)
        }
        let count = "a whole number from 1 to 1000000"
        let parseCount: (String) -> Int? = { Int($0).flatMap { (1...1_000_000).contains($0) ? $0 : nil } }
        if let perAddress = try value(Self.longPollsPerAddress, expected: count, parse: parseCount) {
            configuration.longPollsPerAddress = perAddress
        }
        if let connections = try value(
            Self.connectionsPerAddress, expected: "a whole number from 0 (no cap) to 1000000",
            parse: { Int($0).flatMap { (0...1_000_000).contains($0) ? $0 : nil } })
        {
            configuration.connectionsPerAddress = connections
        }
        if let devices = try value(Self.maxDevicesPerUser, expected: count, parse: parseCount) {
            configuration.maxDevicesPerUser = devices
        }
        if let total = try value(Self.longPollsTotal, expected: count, parse: parseCount) {
            configuration.longPollsTotal = total
        }
        configuration.rateLimits = try rateLimitValues()
        configuration.trustedProxies = try trustedProxyValues()
        if let policy = try value(Self.deviceKeys, expected: "off, optional or required", parse: { DeviceKeyPolicy(rawValue: $0.lowercased()) }) {
            configuration.deviceKeys = policy
        }
        if let scheme = try value(
            Self.appLinkScheme, expected: "a URI scheme: a lower-case letter, then letters, digits, +, - or . (at most 32)",
            parse: { AppIdentity.isLinkScheme($0) ? $0 : nil })
        {
            configuration.app.linkScheme = scheme
        }
        if let issuer = try value(
            Self.otpIssuer, expected: "1 to 64 printable characters without a colon", parse: { AppIdentity.isOTPIssuer($0) ? $0 : nil })
        {
            configuration.app.otpIssuer = issuer
        }
        if let offline = try value(Self.offlineCodes, expected: "on or off", parse: Self.parseOnOff) {
            configuration.offlineCodes = offline
        }
        configuration.push = try pushConfiguration()
        configuration.email = try emailConfiguration()
        return configuration
    }

    /// The email reset's configuration. The SMTP password comes from a file
    /// (`--smtp-password-file`, or `$CREDENTIALS_DIRECTORY/smtp-password`),
    /// never from a flag's value.
    public func emailConfiguration() throws -> EmailConfiguration {
        var email = EmailConfiguration()
        let path = "a file path"
        if let ttl = try value(Self.emailCodeTTL, expected: "whole seconds from 1 to 86400", parse: Self.parseSeconds) {
            email.codeTTL = ttl
        }
        email.publicURL = try value(
            Self.publicURL, expected: "an http(s) URL such as https://auth.example.com",
            parse: { text in
                URL(string: text).flatMap { ($0.scheme == "https" || $0.scheme == "http") && $0.host != nil && $0.query == nil ? text : nil }
            })
        email.linkTemplate = try value(
            Self.resetLinkTemplate, expected: "a URL with a {token} placeholder, e.g. photosync://reset-password?token={token}&email={email}",
            parse: ResetLinkTemplate.init)
        email.templatesDirectory = try value(Self.mailTemplates, expected: "a folder", parse: { $0.isEmpty ? nil : $0 })
        email.secretKeyFile = try value(Self.secretKeyFile, expected: path, parse: { $0.isEmpty ? nil : $0 })
        email.smtp = try smtpConfiguration()
        return email
    }

    /// `nil` when no SMTP URL is set (mail off).
    public func smtpConfiguration() throws -> SMTPConfiguration? {
        guard let (url, source) = try raw(Self.smtpURL), !url.isEmpty else { return nil }
        let plainText =
            try value(
                Self.smtpTLS, expected: "required or none",
                parse: { text -> Bool? in
                    switch text.lowercased() {
                    case "required": false
                    case "none": true
                    default: nil
                    }
                }) ?? false
        guard let from = try raw(Self.smtpFrom)?.value, !from.isEmpty else {
            throw ConfigurationError("\(source) is set but --smtp-from is not: mail needs a sender address")
        }
        let user = try value(Self.smtpUser, expected: "a user name", parse: { $0.isEmpty ? nil : $0 })
        let password = try secret(Self.smtpPasswordFile, credential: EmailConfiguration.smtpPasswordCredential, what: "SMTP password")
        let caFile = try value(Self.smtpCAFile, expected: "a file path", parse: { $0.isEmpty ? nil : $0 })
        do {
            return try SMTPConfiguration(
                url: url.trimmingCharacters(in: .whitespaces), plainText: plainText, user: user, password: password, from: from, caFile: caFile)
        } catch {
            throw ConfigurationError("\(source): \(error.description)")
        }
    }

    /// A secret kept in a file: the one `setting` names, else the systemd
    /// credential `credential` when the unit passes it; its contents without the final newline.
    func secret(_ setting: Setting, credential: String, what: String) throws -> String? {
        guard let file = try value(setting, expected: "a file path", parse: { $0.isEmpty ? nil : $0 }) ?? self.credential(credential) else {
            return nil
        }
        guard let data = FileManager.default.contents(atPath: file) else {
            throw ConfigurationError("cannot read the \(what) file \(file)")
        }
        return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .newlines)
    }

    /// `$CREDENTIALS_DIRECTORY/NAME` when systemd passed that credential.
    func credential(_ name: String) -> String? {
        guard let credentials = environment["CREDENTIALS_DIRECTORY"] else { return nil }
        let candidate = credentials + "/" + name
        return FileManager.default.fileExists(atPath: candidate) ? candidate : nil
    }

    /// Push: FCM, APNs and Web Push. FCM's service account comes from the flag, the environment,
    /// the config file, then `$CREDENTIALS_DIRECTORY/fcm-service-account.json`
    /// (systemd `LoadCredential=`) when that file exists.
    public func pushConfiguration() throws -> PushConfiguration {
        var push = PushConfiguration()
        let path = "a file path"
        push.serviceAccountFile = try value(Self.fcmServiceAccount, expected: path, parse: { $0.isEmpty ? nil : $0 })
        push.serviceAccountFile = push.serviceAccountFile ?? credential(PushConfiguration.credentialName)
        if let endpoint = try value(
            Self.fcmEndpoint, expected: "an http(s) URL such as https://fcm.googleapis.com",
            parse: { text in
                URL(string: text).flatMap { ($0.scheme == "https" || $0.scheme == "http") && $0.host != nil ? text : nil }
            })
        {
            push.endpoint = endpoint
        }
        push.caFile = try value(Self.fcmCAFile, expected: path, parse: { $0.isEmpty ? nil : $0 })
        push.endpoints.allowsPrivate = try value(Self.pushAllowPrivateEndpoints, expected: "on or off", parse: Self.parseOnOff) ?? false
        if let perHost = try value(
            Self.pushPerHostInFlight, expected: "a whole number from 1 to 1000", parse: { Int($0).flatMap { (1...1000).contains($0) ? $0 : nil } })
        {
            push.perHostInFlight = perHost
        }
        if let policy = try value(Self.sealedPush, expected: "off, optional or required", parse: { SealedPushPolicy(rawValue: $0.lowercased()) }) {
            push.sealedPush = policy
        }
        push.apns = try apnsConfiguration()
        push.webPush = try webPushConfiguration()
        return push
    }

    /// APNs, on when a key file is given (`--apns-key-file` or the `apns-key` credential); its key and team ids are then required.
    func apnsConfiguration() throws -> APNsConfiguration? {
        let path = "a file path"
        guard
            let keyFile = try value(Self.apnsKeyFile, expected: path, parse: { $0.isEmpty ? nil : $0 })
                ?? credential(APNsConfiguration.credentialName)
        else { return nil }
        let id = "the 10 letters and digits Apple shows"
        let parseID: (String) -> String? = { $0.count == 10 && $0.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber) } ? $0 : nil }
        guard let keyID = try value(Self.apnsKeyID, expected: id, parse: parseID) else {
            throw ConfigurationError("an APNs key is configured (\(keyFile)) but --apns-key-id is not")
        }
        guard let teamID = try value(Self.apnsTeamID, expected: id, parse: parseID) else {
            throw ConfigurationError("an APNs key is configured (\(keyFile)) but --apns-team-id is not")
        }
        var settings = APNsConfiguration(keyFile: keyFile, keyID: keyID, teamID: teamID)
        settings.url = try value(
            Self.apnsURL, expected: "an https URL such as https://api.push.apple.com",
            parse: { text in URL(string: text).flatMap { ($0.scheme == "https" || $0.scheme == "http") && $0.host != nil ? text : nil } })
        settings.caFile = try value(Self.apnsCAFile, expected: path, parse: { $0.isEmpty ? nil : $0 })
        return settings
    }

    /// Web Push, on when `--vapid-subject` is given. The VAPID key: `--vapid-key-file`, the `vapid-key`
    /// credential, else `countersign.vapid.pem` beside the SQLite database (created on first start).
    /// A cluster's nodes share one key: with PostgreSQL the file must be given and exist.
    func webPushConfiguration() throws -> WebPushConfiguration? {
        guard
            let subject = try value(
                Self.vapidSubject, expected: "mailto:ADDRESS or an https:// URL",
                parse: { text in
                    (text.hasPrefix("mailto:") && text.count > 8 && text.contains("@"))
                        || (text.hasPrefix("https://") && URL(string: text)?.host != nil)
                        ? text : nil
                })
        else { return nil }
        let database = try databasePath()
        if let file = try value(Self.vapidKeyFile, expected: "a file path", parse: { $0.isEmpty ? nil : $0 }) ?? credential("vapid-key") {
            return WebPushConfiguration(vapidKeyFile: file, subject: subject, createKey: !PostgresConfiguration.isURL(database))
        }
        guard !PostgresConfiguration.isURL(database) else {
            throw ConfigurationError("with a PostgreSQL database, give the nodes' VAPID key: --vapid-key-file")
        }
        let beside = URL(fileURLWithPath: database).deletingLastPathComponent().appendingPathComponent("countersign.vapid.pem").path
        return WebPushConfiguration(vapidKeyFile: beside, subject: subject)
    }

    /// Each limit from the flag that names it, else the environment, else the file: every source's list is read
    /// (not only the first that has one), the later ones overriding a name the earlier ones set.
    func rateLimitValues() throws -> [RateLimitName: RateLimit] {
        var limits: [RateLimitName: RateLimit] = [:]
        let setting = Self.rateLimits
        if let problem = fileProblems[setting.fileKey] { throw problem }
        let providers: [any ConfigProvider] = [file, environmentVariables, commandLine]
        for provider in providers {
            let items = try provider.value(forKey: setting.configKey, type: .stringArray).value?.content.asStringArray ?? []
            let source = self.source(of: setting, providerName: provider.providerName)
            // `a=1/2,` in the environment: the empty item after a trailing comma is no limit.
            for item in items where !(item.isEmpty && provider.providerName == environmentVariables.providerName) {
                let (name, limit) = try Self.parseLimit(item, source: source)
                limits[name] = limit
            }
        }
        return limits
    }

    /// The flag's list if given, else the environment's, else the file's.
    func trustedProxyValues() throws -> [IPNetwork] {
        let setting = Self.trustedProxies
        let read = reader.stringArray(forKey: setting.readKey)
        try answers.check(setting.configKey, reading: setting.flag)
        guard var items = read else {
            if let problem = fileProblems[setting.fileKey] { throw problem }
            return []
        }
        let answered = answers.provider(of: setting.configKey)
        let source = self.source(of: setting, providerName: answered)
        if answered == environmentVariables.providerName { items.removeAll(where: \.isEmpty) }
        return try items.map { item in
            let trimmed = item.trimmingCharacters(in: .whitespaces)
            guard let network = IPNetwork(trimmed) else {
                throw ConfigurationError("invalid value \"\(item)\" for \(source): expected an IP address or CIDR, e.g. 10.0.0.0/8")
            }
            return network
        }
    }

    static func limitName(_ key: String, source: String) throws -> RateLimitName {
        guard let name = RateLimitName(rawValue: key) else {
            let known = RateLimitName.allCases.map(\.rawValue).joined(separator: ", ")
            throw ConfigurationError("unknown rate limit \"\(key)\" in \(source) (known: \(known))")
        }
        return name
    }

    /// `NAME=COUNT/SECONDS`.
    static func parseLimit(_ text: String, source: String) throws -> (RateLimitName, RateLimit) {
        let parts = text.trimmingCharacters(in: .whitespaces).split(separator: "=", maxSplits: 1).map(String.init)
        guard parts.count == 2 else {
            throw ConfigurationError("invalid value \"\(text)\" for \(source): expected NAME=COUNT/SECONDS, e.g. statusPollsPerIP=50/1")
        }
        let name = try limitName(parts[0], source: source)
        let numbers = parts[1].split(separator: "/").map { Int($0) }
        guard numbers.count == 2, let count = numbers[0], let window = numbers[1], count > 0, (1...86400).contains(window) else {
            throw ConfigurationError("invalid value \"\(text)\" for \(source): expected NAME=COUNT/SECONDS with COUNT ≥ 1 and 1…86400 seconds")
        }
        return (name, RateLimit(count: count, window: TimeInterval(window)))
    }

    static func parseListen(_ text: String) -> (String, Int)? {
        guard let colon = text.lastIndex(of: ":") else { return nil }
        var host = String(text[..<colon])
        if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        guard !host.isEmpty, let port = Int(text[text.index(after: colon)...]), (0...65535).contains(port) else { return nil }
        return (host, port)
    }

    static func parseSeconds(_ text: String) -> TimeInterval? {
        guard let seconds = Int(text), (1...86400).contains(seconds) else { return nil }
        return TimeInterval(seconds)
    }

    static func parseOnOff(_ text: String) -> Bool? {
        switch text.lowercased() {
        case "on": true
        case "off": false
        default: nil
        }
    }

    static func parseNumberMatching(_ text: String) -> Bool? {
        switch text.lowercased() {
        case "required", "on": true
        case "off": false
        default: nil
        }
    }
}

/// Remembers, for each key read, the provider whose value the reader returned (swift-configuration reports every
/// read to its access reporter, with each provider's answer in order).
final class AnsweringProviders: AccessReporter {
    private let answered = Mutex<[AbsoluteConfigKey: Result<String?, any Error>]>([:])

    func report(_ event: AccessEvent) {
        // The reader stops at the first provider that fails, and answers "unset": keep the failure to say it.
        let answer: Result<String?, any Error>
        if let failure = event.providerResults.lazy.compactMap({ result -> (any Error)? in
            if case .failure(let error) = result.result { error } else { nil }
        }).first {
            answer = .failure(failure)
        } else if let failure = event.conversionError {
            answer = .failure(failure)
        } else {
            answer = .success(
                event.providerResults.last { result in
                    if case .success(let lookup) = result.result { lookup.value != nil } else { false }
                }?.providerName)
        }
        answered.withLock { $0[event.metadata.key] = answer }
    }

    func provider(of key: AbsoluteConfigKey) -> String? {
        answered.withLock { (try? $0[key]?.get()) ?? nil }
    }

    /// Throws when the last read of `key` failed in a provider (a value of another type than the one read).
    func check(_ key: AbsoluteConfigKey, reading flag: String) throws {
        if case .failure(let error) = answered.withLock({ $0[key] }) {
            throw ConfigurationError("cannot read \(flag): \(error)")
        }
    }
}

extension ConfigContent {
    var asStringArray: [String]? {
        if case .stringArray(let values) = self { values } else { nil }
    }
}

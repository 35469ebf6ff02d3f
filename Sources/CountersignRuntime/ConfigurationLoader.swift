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
    /// The settings, declared once (``Settings``).
    static var infos: [SettingInfo] { Settings.all.map(\.info) }

    /// The settings as swift-configuration reads them: the command line, then the environment, then the config file.
    let reader: ConfigReader
    /// Which provider answered each read, so that a refusal can name where the bad value came from.
    let answers: ValueSources
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
        for setting in Self.infos {
            if let value = flags[setting.flag] {
                given[setting.configKey] = ConfigValue(.string(value), isSecret: setting.isSecret)
            } else if let values = lists[setting.flag], !values.isEmpty {
                given[setting.configKey] = ConfigValue(.stringArray(values), isSecret: setting.isSecret)
            }
        }
        self.commandLine = InMemoryProvider(name: "command line", values: given)
        // The environment's names are the daemon's own (COUNTERSIGN_REQUEST_TTL), not the key's default spelling (REQUEST_TTL).
        let environmentNames = Dictionary(uniqueKeysWithValues: Self.infos.map { ($0.configKey, AbsoluteConfigKey([$0.environment])) })
        self.environmentVariables = KeyMappingProvider(
            upstream: EnvironmentVariablesProvider(
                environmentVariables: environment, secretsSpecifier: .specific(Set(Self.infos.filter(\.isSecret).map(\.environment)))),
            keyMapper: { key in environmentNames[key] ?? AbsoluteConfigKey(["COUNTERSIGN_UNKNOWN"] + key.components) })
        let (fileValues, fileProblems) = try filePath.map(Self.fileValues) ?? ([:], [:])
        self.file = InMemoryProvider(name: filePath ?? "config file", values: fileValues)
        self.fileProblems = fileProblems
        self.answers = ValueSources()
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
        let settings = Dictionary(uniqueKeysWithValues: Self.infos.map { ($0.fileKey, $0) })
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
                case Settings.table.rateLimits.fileKey:
                    content = .stringArray(try Self.fileRateLimits(value, source: source))
                case Settings.table.trustedProxies.fileKey:
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
    func source(of setting: SettingInfo, providerName: String?) -> String {
        switch providerName {
        case commandLine.providerName: setting.flag
        case environmentVariables.providerName: setting.environment
        default: "\(filePath ?? "config file"): \(setting.fileKey)"
        }
    }

    /// The raw value of a setting and where it came from, or `nil` when unset.
    func raw(_ setting: SettingInfo) throws -> (value: String, source: String)? {
        let value = reader.string(forKey: setting.readKey, isSecret: setting.isSecret)
        try answers.check(setting.configKey, reading: setting.flag)
        guard let value else {
            // Set in the file, but not as a value of its kind (and not overridden).
            if let problem = fileProblems[setting.fileKey] { throw problem }
            return nil
        }
        return (value, source(of: setting, providerName: answers.provider(of: setting.configKey)))
    }

    /// A setting's value, parsed as its declaration says; `nil` when unset. A value the parse refuses stops here,
    /// naming where it came from and what was expected.
    public func value<T>(_ setting: Setting<T>) throws -> T? {
        guard let (raw, source) = try raw(setting.info) else { return nil }
        guard let value = setting.parse(raw.trimmingCharacters(in: .whitespaces)) else {
            // A secret (a database URL may hold its password) is not repeated where the journal keeps it.
            let shown = setting.isSecret ? "" : "\"\(raw)\" "
            throw ConfigurationError("invalid value \(shown)for \(source): expected \(setting.expected)")
        }
        return value
    }

    /// The setting the table declares at `path`.
    func value<T>(_ path: KeyPath<Settings, Setting<T>>) throws -> T? {
        try value(Settings.table[keyPath: path])
    }

    /// Reads each setting of `group` (every group: `nil`) that is a field of the configuration, in the table's order.
    func apply(_ group: SettingInfo.Group?, to configuration: inout ServeConfiguration) throws {
        for setting in Settings.all where group == nil || setting.info.group == group {
            try setting.apply(from: self, to: &configuration)
        }
    }

    /// Each setting as `serve` reads it, in the table's order: its value as given and where it came from, else its
    /// default. A URL's password is replaced by `REDACTED`; a list shows its items; rate limits show every name set,
    /// merged from every source.
    public func effectiveSettings() throws -> [(setting: SettingInfo, value: String, source: String)] {
        try Self.infos.map { setting in
            if setting.fileKey == Settings.table.rateLimits.fileKey {
                let limits = try rateLimitValues().map { "\($0.key.rawValue)=\($0.value.count)/\(Int($0.value.window))" }.sorted()
                return (setting, limits.isEmpty ? "none" : limits.joined(separator: ","), limits.isEmpty ? "default" : "merged from every source")
            }
            if setting.isList {
                let items = reader.stringArray(forKey: setting.readKey)
                try answers.check(setting.configKey, reading: setting.flag)
                guard let items, !items.isEmpty else { return (setting, "none", "default") }
                return (setting, items.joined(separator: ","), source(of: setting, providerName: answers.provider(of: setting.configKey)))
            }
            if setting.fileKey == Settings.table.requestTimeout.fileKey, try raw(setting) == nil,
                let (value, source) = try raw(Settings.table.headerTimeout.info)
            {
                return (setting, value, "\(source), its older name")
            }
            guard let (value, source) = try raw(setting) else { return (setting, setting.shownDefault ?? "unset", "default") }
            return (setting, setting.isSecret ? Self.redacted(value) : value, source)
        }
    }

    /// `value` with the password of a URL in it replaced: a file path, or a URL without a password, is shown as it is;
    /// a URL that cannot be read is not shown at all.
    static func redacted(_ value: String) -> String {
        guard value.contains("://") else { return value }
        guard var url = URLComponents(string: value) else { return "REDACTED" }
        if url.password != nil { url.password = "REDACTED" }
        return url.string ?? "REDACTED"
    }

    /// `--log-format`, when set: read first, so that even a refusal of the other settings is written as the log is.
    public func logFormat() throws -> LogFormat? {
        try value(\.logFormat)
    }

    public func databasePath() throws -> String {
        try value(\.database) ?? ServeConfiguration.defaultDatabasePath(environment: environment)
    }

    /// The database (`--database`, with `--database-password-file` or the `database-password` credential for PostgreSQL).
    public func database() throws -> DatabaseLocation {
        let path = try databasePath()
        guard PostgresConfiguration.isURL(path) else { return .sqlite(path: path) }
        return try DatabaseLocation.postgres(
            url: path, password: try secret(\.databasePasswordFile, credential: DatabaseLocation.passwordCredential, what: "database password"),
            connectionWait: try value(\.databaseConnectionWait).map { .seconds($0) }, queryLimit: try value(\.databaseQueryLimit).map { .seconds($0) }
        )
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
        let file = try value(\.secretKeyFile) ?? nil
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
        try value(\.bcryptCost) ?? ServeConfiguration(databasePath: "").bcryptCost
    }

    /// Everything `serve` needs: each setting that is a field of the configuration, in the table's order, then those
    /// read together (the database, lists, push providers, mail).
    public func serveConfiguration() throws -> ServeConfiguration {
        var configuration = ServeConfiguration(databasePath: try databasePath())
        configuration.database = try database()
        try apply(nil, to: &configuration)
        // The request timeout's older name, when the request timeout itself is set in no source.
        if let header = try value(\.headerTimeout), try raw(Settings.table.requestTimeout.info) == nil {
            configuration.requestTimeout = header
        }
        configuration.rateLimits = try rateLimitValues()
        configuration.trustedProxies = try trustedProxyValues()
        configuration.push = try pushConfiguration()
        configuration.email.smtp = try smtpConfiguration()
        return configuration
    }

    /// `nil` when no SMTP URL is set (mail off). The SMTP password comes from a file
    /// (`--smtp-password-file`, or `$CREDENTIALS_DIRECTORY/smtp-password`), never from a flag's value.
    public func smtpConfiguration() throws -> SMTPConfiguration? {
        guard let (url, source) = try raw(Settings.table.smtpURL.info), !url.isEmpty else { return nil }
        let plainText = try value(\.smtpTLS) ?? false
        guard let from = try raw(Settings.table.smtpFrom.info)?.value, !from.isEmpty else {
            throw ConfigurationError("\(source) is set but --smtp-from is not: mail needs a sender address")
        }
        let user = try value(\.smtpUser)
        let password = try secret(\.smtpPasswordFile, credential: EmailConfiguration.smtpPasswordCredential, what: "SMTP password")
        let caFile = try value(\.smtpCAFile)
        do {
            return try SMTPConfiguration(
                url: url.trimmingCharacters(in: .whitespaces), plainText: plainText, user: user, password: password, from: from, caFile: caFile)
        } catch {
            throw ConfigurationError("\(source): \(error.description)")
        }
    }

    /// A secret kept in a file: the one `setting` names, else the systemd
    /// credential `credential` when the unit passes it; its contents without the final newline.
    func secret(_ setting: KeyPath<Settings, Setting<String>>, credential: String, what: String) throws -> String? {
        guard let file = try value(setting) ?? self.credential(credential) else { return nil }
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
        var configuration = ServeConfiguration(databasePath: "")
        try apply(.push, to: &configuration)
        var push = configuration.push
        push.serviceAccountFile = try value(\.fcmServiceAccount) ?? credential(PushConfiguration.credentialName)
        push.apns = try apnsConfiguration()
        push.webPush = try webPushConfiguration()
        return push
    }

    /// APNs, on when a key file is given (`--apns-key-file` or the `apns-key` credential); its key and team ids are then required.
    func apnsConfiguration() throws -> APNsConfiguration? {
        guard let keyFile = try value(\.apnsKeyFile) ?? credential(APNsConfiguration.credentialName) else { return nil }
        guard let keyID = try value(\.apnsKeyID) else {
            throw ConfigurationError("an APNs key is configured (\(keyFile)) but --apns-key-id is not")
        }
        guard let teamID = try value(\.apnsTeamID) else {
            throw ConfigurationError("an APNs key is configured (\(keyFile)) but --apns-team-id is not")
        }
        return APNsConfiguration(keyFile: keyFile, keyID: keyID, teamID: teamID, url: try value(\.apnsURL), caFile: try value(\.apnsCAFile))
    }

    /// Web Push, on when `--vapid-subject` is given. The VAPID key: `--vapid-key-file`, the `vapid-key`
    /// credential, else `countersign.vapid.pem` beside the SQLite database (created on first start).
    /// A cluster's nodes share one key: with PostgreSQL the file must be given and exist.
    func webPushConfiguration() throws -> WebPushConfiguration? {
        guard let subject = try value(\.vapidSubject) else { return nil }
        let database = try databasePath()
        if let file = try value(\.vapidKeyFile) ?? credential("vapid-key") {
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
        let setting = Settings.table.rateLimits.info
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
        let setting = Settings.table.trustedProxies.info
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
            guard let network = Settings.table.trustedProxies.parse(item.trimmingCharacters(in: .whitespaces)) else {
                throw ConfigurationError("invalid value \"\(item)\" for \(source): expected \(setting.expected)")
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
            throw ConfigurationError("invalid value \"\(text)\" for \(source): expected \(Settings.table.rateLimits.expected)")
        }
        let name = try limitName(parts[0], source: source)
        let numbers = parts[1].split(separator: "/").map { Int($0) }
        guard numbers.count == 2, let count = numbers[0], let window = numbers[1], count > 0, (1...86400).contains(window) else {
            throw ConfigurationError("invalid value \"\(text)\" for \(source): expected NAME=COUNT/SECONDS with COUNT ≥ 1 and 1…86400 seconds")
        }
        return (name, RateLimit(count: count, window: TimeInterval(window)))
    }
}

/// Remembers, for each key read, the provider whose value the reader returned (swift-configuration reports every
/// read to its access reporter, with each provider's answer in order).
final class ValueSources: AccessReporter {
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

extension SettingInfo {
    /// The setting's key for the configuration reader: its config-file key (`fcm.endpoint`).
    var readKey: ConfigKey { ConfigKey(fileKey) }
    var configKey: AbsoluteConfigKey { AbsoluteConfigKey(readKey) }
}

extension ConfigContent {
    var asStringArray: [String]? {
        if case .stringArray(let values) = self { values } else { nil }
    }
}

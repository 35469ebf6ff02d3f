import CountersignCore
import CountersignPostgres
import CountersignPush
import Foundation
import Logging

/// What one setting is, in one place: its config-file key, its flag, its environment variable, its group in
/// `serve --help`, what to give it, what it does, its default as help shows it, what a valid value looks like (said
/// when a value is refused), and whether it may hold a password.
public struct SettingInfo: Sendable {
    /// The sections of `serve --help`, in order.
    public enum Group: String, Sendable, CaseIterable {
        case listening = "Listening"
        case storage = "Storage"
        case approvals = "Approvals"
        case limits = "Limits"
        case logs = "Logs and audit"
        case push = "Push"
        case mail = "Mail"
        case emailReset = "Email reset"
    }

    /// The config file's key (`fcm.endpoint`: `"fcm": {"endpoint": …}`).
    public let fileKey: String
    /// `--listen`.
    public let flag: String
    /// `COUNTERSIGN_LISTEN`.
    public let environment: String
    public let group: Group
    /// What to give, as help names it (`seconds`, `host:port`); `nil` for a switch, which takes no value on the
    /// command line (the environment and the file say `on`).
    public let valueName: String?
    public let help: String
    /// The default, as help shows it; `nil` when none is worth saying.
    public let shownDefault: String?
    /// What a valid value looks like, for the line that refuses one.
    public let expected: String
    /// A value that may hold a password (a database or SMTP URL): marked secret for swift-configuration and never
    /// repeated in a refusal.
    public let isSecret: Bool
    /// Repeatable on the command line; a comma-separated list in the environment; an array (or, for rate limits,
    /// an object) in the file.
    public let isList: Bool

    /// The flag without its dashes, as a command-line parser names it (`listen`).
    public var longName: String { String(flag.drop { $0 == "-" }) }
}

/// A setting and what its value becomes: the parse of its text (`nil`: refused) and, for a setting that is one
/// field of ``ServeConfiguration``, where the value goes.
@dynamicMemberLookup
public struct Setting<Value: Sendable>: Sendable {
    public let info: SettingInfo
    let parse: @Sendable (String) -> Value?
    let store: (@Sendable (inout ServeConfiguration, Value) -> Void)?
    /// Whether help's default is the configuration field's own, written by the setting's `show`.
    public let showsFieldDefault: Bool

    public subscript<T>(dynamicMember path: KeyPath<SettingInfo, T>) -> T { info[keyPath: path] }

    /// A setting read by code of its own (a file, a credential, a list, settings that go together).
    init(
        _ key: String, _ flag: String, environment: String? = nil, _ group: SettingInfo.Group, value valueName: String?, help: String,
        default shown: String? = nil, expected: String, secret: Bool = false, list: Bool = false,
        parse: @escaping @Sendable (String) -> Value?
    ) {
        self.info = SettingInfo(
            fileKey: key, flag: flag,
            environment: environment ?? "COUNTERSIGN_" + flag.drop { $0 == "-" }.uppercased().replacingOccurrences(of: "-", with: "_"),
            group: group, valueName: valueName, help: help, shownDefault: shown, expected: expected, isSecret: secret, isList: list)
        self.parse = parse
        self.store = nil
        self.showsFieldDefault = false
    }

    /// A setting that is one field of ``ServeConfiguration``: its default, shown in help, is that field's
    /// (`show` writes it), so a default is written once, where the configuration declares it.
    init(
        _ key: String, _ flag: String, _ group: SettingInfo.Group, value valueName: String?, help: String, expected: String,
        parse: @escaping @Sendable (String) -> Value?, at field: any WritableKeyPath<ServeConfiguration, Value> & Sendable,
        show: ((Value) -> String)? = nil, default text: String? = nil
    ) {
        let defaults = ServeConfiguration(databasePath: "")
        self.init(
            key, flag, group, value: valueName, help: help, default: show.map { $0(defaults[keyPath: field]) } ?? text, expected: expected,
            parse: parse)
        self = Setting(info: info, parse: parse, store: { $0[keyPath: field] = $1 }, showsFieldDefault: show != nil)
    }

    private init(
        info: SettingInfo, parse: @escaping @Sendable (String) -> Value?, store: (@Sendable (inout ServeConfiguration, Value) -> Void)?,
        showsFieldDefault: Bool
    ) {
        self.info = info
        self.parse = parse
        self.store = store
        self.showsFieldDefault = showsFieldDefault
    }
}

/// A setting of any type, for the list of them all.
public protocol AnySetting: Sendable {
    var info: SettingInfo { get }
    /// Whether help's default is the configuration field's own (so it must parse back to it).
    var showsFieldDefault: Bool { get }
    /// Reads the setting and, when it is set and is a field of the configuration, stores it there.
    func apply(from loader: ConfigurationLoader, to configuration: inout ServeConfiguration) throws
}

extension Setting: AnySetting {
    public func apply(from loader: ConfigurationLoader, to configuration: inout ServeConfiguration) throws {
        guard let store, let value = try loader.value(self) else { return }
        store(&configuration, value)
    }
}

/// Every setting of the daemon, each declared here once. `serve --help` (the groups' options name their setting
/// and take its help from here), the environment's and the file's names, the parse and the refusal that names a bad
/// value's source all come from these declarations; ``all`` lists them in this order.
public struct Settings: Sendable {
    // MARK: Listening

    public let listen = Setting(
        "listen", "--listen", .listening, value: "host:port", help: "The API's address.", expected: "HOST:PORT, e.g. 127.0.0.1:8080",
        parse: Parse.listen, at: \.listen, show: { "\($0.host):\($0.port)" })
    public let metricsListen = Setting<ListenAddress?>(
        "metricsListen", "--metrics-listen", .listening, value: "host:port",
        help: "Where /metrics is served, or off; never on the API's address.", expected: "HOST:PORT (e.g. 127.0.0.1:9464) or off",
        parse: { $0 == "off" ? .some(nil) : Parse.listen($0).map { .some($0) } }, at: \.metricsListen,
        show: { $0.map { "\($0.host):\($0.port)" } ?? "off" })
    public let trustedProxies = Setting<IPNetwork>(
        "trustedProxies", "--trusted-proxy", environment: "COUNTERSIGN_TRUSTED_PROXIES", .listening, value: "ip-or-cidr",
        help: "A proxy whose X-Forwarded-For is believed (repeatable).", expected: "an IP address or CIDR, e.g. 10.0.0.0/8", list: true,
        parse: IPNetwork.init)
    public let connectionsPerAddress = Setting(
        "connectionsPerAddress", "--connections-per-address", .listening, value: "count",
        help: "Open connections per client address (per /64 for IPv6), 0 for no cap; trusted proxies are not capped.",
        expected: "a whole number from 0 (no cap) to 1000000", parse: Parse.whole(0...1_000_000), at: \.connectionsPerAddress,
        show: { "\($0)" })
    public let idleTimeout = Setting(
        "idleTimeout", "--idle-timeout", .listening, value: "seconds", help: "Seconds before an idle connection is closed.",
        expected: Parse.secondsExpected, parse: { Parse.seconds($0).map(Duration.seconds) }, at: \.idleTimeout, show: Parse.showSeconds)
    /// The older name of ``requestTimeout``, still read: used when the request timeout is set nowhere
    /// (``ConfigurationLoader/serveConfiguration()``).
    public let headerTimeout = Setting<Duration>(
        "headerTimeout", "--header-timeout", .listening, value: "seconds", help: "The older name of --request-timeout.",
        expected: Parse.secondsExpected, parse: { Parse.seconds($0).map(Duration.seconds) })
    public let requestTimeout = Setting(
        "requestTimeout", "--request-timeout", .listening, value: "seconds",
        help: "Seconds a request (headers and body) may take to arrive after its first byte.", expected: Parse.secondsExpected,
        parse: { Parse.seconds($0).map(Duration.seconds) }, at: \.requestTimeout, show: Parse.showSeconds)
    public let longPollsPerAddress = Setting(
        "longPollsPerAddress", "--long-polls-per-address", .listening, value: "count", help: "Long polls held at once per client address.",
        expected: Parse.countExpected, parse: Parse.whole(1...1_000_000), at: \.longPollsPerAddress, show: { "\($0)" })
    public let longPollsMax = Setting(
        "longPollsMax", "--long-polls-max", .listening, value: "count", help: "Long polls held at once on this node.",
        expected: Parse.countExpected, parse: Parse.whole(1...1_000_000), at: \.longPollsTotal, show: { "\($0)" })

    // MARK: Storage

    public let database = Setting<String>(
        "database", "--database", .storage, value: "file-or-url",
        help: "The SQLite database file, or postgres://USER@HOST:PORT/DATABASE?sslmode=… for a cluster of nodes on one PostgreSQL database.",
        default: "$STATE_DIRECTORY/countersign.sqlite, else ./countersign.sqlite", expected: "a file path or a postgres:// URL", secret: true,
        parse: Parse.nonEmpty)
    public let databasePasswordFile = Setting<String>(
        "databasePasswordFile", "--database-password-file", .storage, value: "file",
        help: "File holding the PostgreSQL password when the URL has none.", default: "$CREDENTIALS_DIRECTORY/database-password",
        expected: Parse.pathExpected, parse: Parse.nonEmpty)
    public let databaseConnectionWait = Setting<TimeInterval>(
        "databaseConnectionWait", "--database-connection-wait", .storage, value: "seconds",
        help: "PostgreSQL: seconds a query waits for a pooled connection before answering 503.",
        default: Parse.showSeconds(PostgresConfiguration.defaultConnectionWait), expected: Parse.secondsExpected, parse: Parse.seconds)
    public let databaseQueryLimit = Setting<TimeInterval>(
        "databaseQueryLimit", "--database-query-limit", .storage, value: "seconds",
        help: "PostgreSQL: seconds a query or transaction may run before its connection is closed and it answers 503.",
        default: Parse.showSeconds(PostgresConfiguration.defaultQueryLimit), expected: Parse.secondsExpected, parse: Parse.seconds)
    public let nodeID = Setting<String?>(
        "nodeID", "--node-id", .storage, value: "name", help: "This node's name in a cluster.", expected: "1 to 100 letters, digits or - _ . :",
        parse: { Parse.nodeID($0).map { .some($0) } }, at: \.nodeID, default: "HOSTNAME:PORT")
    public let secretKeyFile = Setting<String?>(
        "secretKeyFile", "--secret-key-file", .storage, value: "file", help: "The daemon's secret key, 32 bytes or more.",
        expected: Parse.pathExpected, parse: { Parse.nonEmpty($0).map { .some($0) } }, at: \.email.secretKeyFile,
        default: "$CREDENTIALS_DIRECTORY/\(EmailConfiguration.secretKeyCredential), else countersign.key beside the database")

    // MARK: Approvals

    public let requestTTL = Setting(
        "requestTTL", "--request-ttl", .approvals, value: "seconds", help: "Seconds a request stays pending.", expected: Parse.secondsExpected,
        parse: Parse.seconds, at: \.broker.requestTTL, show: Parse.showSeconds)
    public let completionWindow = Setting(
        "completionWindow", "--completion-window", .approvals, value: "seconds", help: "Seconds an approved request may wait for completion.",
        expected: Parse.secondsExpected, parse: Parse.seconds, at: \.broker.completionWindow, show: Parse.showSeconds)
    public let numberMatching = Setting(
        "numberMatching", "--number-matching", .approvals, value: "required|off",
        help: "Number matching: the phone's user enters the number the requester shows, and an answer without it is refused.",
        expected: "required or off",
        parse: { ["required": true, "on": true, "off": false][$0.lowercased()] }, at: \.broker.numberMatching,
        show: { $0 ? "required" : "off" })
    public let deviceKeys = Setting(
        "deviceKeys", "--device-keys", .approvals, value: "off|optional|required",
        help: "Signed answers: off, optional (a device with a key must sign) or required (every answer signed).",
        expected: "off, optional or required", parse: { DeviceKeyPolicy(rawValue: $0.lowercased()) }, at: \.deviceKeys, show: \.rawValue)
    public let offlineCodes = Setting(
        "offlineCodes", "--offline-codes", .approvals, value: "on|off",
        help: "Offline codes: TOTP on each trusted device, typed where the requester waits.", expected: "on or off", parse: Parse.onOff,
        at: \.offlineCodes, show: Parse.showOnOff)
    public let appLinkScheme = Setting(
        "appLinkScheme", "--app-link-scheme", .approvals, value: "scheme",
        help: "The phone app's URI scheme, in enrollment links (SCHEME://enroll?url=…&code=…).",
        expected: "a URI scheme: a lower-case letter, then letters, digits, +, - or . (at most 32)",
        parse: { AppIdentity.isLinkScheme($0) ? $0 : nil }, at: \.app.linkScheme, show: { $0 })
    public let otpIssuer = Setting(
        "otpIssuer", "--otp-issuer", .approvals, value: "name",
        help: "The issuer authenticator apps show for offline codes (otpauth:// URIs).", expected: "1 to 64 printable characters without a colon",
        parse: { AppIdentity.isOTPIssuer($0) ? $0 : nil }, at: \.app.otpIssuer, show: { $0 })
    public let fraudSilence = Setting(
        "fraudSilence", "--fraud-silence", .approvals, value: "seconds", help: "Seconds a fraud report silences the user's prompts.",
        expected: "whole seconds from 1 to 604800", parse: { Parse.whole(1...604_800)($0).map(TimeInterval.init) }, at: \.fraudSilence,
        show: Parse.showSeconds)
    public let maxDevicesPerUser = Setting(
        "maxDevicesPerUser", "--max-devices-per-user", .approvals, value: "count", help: "The most devices one user may have.",
        expected: Parse.countExpected, parse: Parse.whole(1...1_000_000), at: \.maxDevicesPerUser, show: { "\($0)" })

    // MARK: Limits

    public let bcryptCost = Setting(
        "bcryptCost", "--bcrypt-cost", .limits, value: "cost",
        help: "bcrypt cost, \(BcryptPasswordHasher.costRange.lowerBound)…\(BcryptPasswordHasher.costRange.upperBound).",
        expected: "a whole number from \(BcryptPasswordHasher.costRange.lowerBound) to \(BcryptPasswordHasher.costRange.upperBound)",
        parse: Parse.whole(BcryptPasswordHasher.costRange), at: \.bcryptCost, show: { "\($0)" })
    public let bcryptQueue = Setting(
        "bcryptQueue", "--bcrypt-queue", .limits, value: "count", help: "bcrypt jobs running or waiting at once; past it, 503 unavailable.",
        expected: "a whole number from 1 to 10000", parse: Parse.whole(1...10_000), at: \.bcryptQueue, show: { "\($0)" })
    /// `--rate-limit NAME=COUNT/SECONDS`; environment `NAME=COUNT/SECONDS,…`; file `{"NAME": {"count": C, "window": S}}`.
    public let rateLimits = Setting<String>(
        "rateLimits", "--rate-limit", environment: "COUNTERSIGN_RATE_LIMITS", .limits, value: "name=count/seconds",
        help: "Override one rate limit: at most COUNT per SECONDS (repeatable).", expected: "NAME=COUNT/SECONDS, e.g. statusPollsPerIP=50/1",
        list: true, parse: { $0 })

    // MARK: Logs and audit

    public let logLevel = Setting(
        "logLevel", "--log-level", .logs, value: "level", help: "Log level: trace, debug, info, notice, warning, error or critical.",
        expected: "trace, debug, info, notice, warning, error or critical", parse: { Logger.Level(rawValue: $0.lowercased()) }, at: \.logLevel,
        show: \.rawValue)
    public let logFormat = Setting(
        "logFormat", "--log-format", .logs, value: "text|json",
        help: "text (with priority prefixes and no timestamp when standard error is the journal) or json (one object a line).",
        expected: "text or json", parse: { LogFormat(rawValue: $0.lowercased()) }, at: \.logFormat, show: \.rawValue)
    public let auditRetentionDays = Setting(
        "auditRetentionDays", "--audit-retention-days", .logs, value: "days", help: "Days audit events and finished requests are kept.",
        expected: "whole days from 1 to 3650", parse: { Parse.whole(1...3650)($0).map { TimeInterval($0) * 86400 } }, at: \.retention,
        show: { "\(Int($0 / 86400))" })

    // MARK: Push

    public let fcmServiceAccount = Setting<String>(
        "fcm.serviceAccountFile", "--fcm-service-account", .push, value: "file", help: "The FCM service-account key file: turns FCM on.",
        default: "$CREDENTIALS_DIRECTORY/\(PushConfiguration.credentialName)", expected: Parse.pathExpected, parse: Parse.nonEmpty)
    public let fcmEndpoint = Setting(
        "fcm.endpoint", "--fcm-endpoint", .push, value: "url", help: "FCM's base URL.", expected: "an http(s) URL such as https://fcm.googleapis.com",
        parse: Parse.httpURL, at: \.push.endpoint, show: { $0 })
    public let fcmCAFile = Setting<String?>(
        "fcm.caFile", "--fcm-ca-file", .push, value: "file", help: "An extra trusted CA (PEM) for FCM's token and send addresses.",
        expected: Parse.pathExpected, parse: { Parse.nonEmpty($0).map { .some($0) } }, at: \.push.caFile)
    public let apnsKeyFile = Setting<String>(
        "apns.keyFile", "--apns-key-file", .push, value: "file", help: "The APNs token-based key (.p8): turns APNs on.",
        default: "$CREDENTIALS_DIRECTORY/\(APNsConfiguration.credentialName)", expected: Parse.pathExpected, parse: Parse.nonEmpty)
    public let apnsKeyID = Setting<String>(
        "apns.keyID", "--apns-key-id", .push, value: "id", help: "The APNs key's id (10 characters).", expected: Parse.appleIDExpected,
        parse: Parse.appleID)
    public let apnsTeamID = Setting<String>(
        "apns.teamID", "--apns-team-id", .push, value: "id", help: "The Apple developer team id (10 characters).", expected: Parse.appleIDExpected,
        parse: Parse.appleID)
    public let apnsURL = Setting<String>(
        "apns.url", "--apns-url", .push, value: "url", help: "Send to this APNs address for both environments.",
        default: "api.push.apple.com and api.sandbox.push.apple.com", expected: "an https URL such as https://api.push.apple.com",
        parse: Parse.httpURL)
    public let apnsCAFile = Setting<String>(
        "apns.caFile", "--apns-ca-file", .push, value: "file", help: "An extra trusted CA (PEM) for the APNs address.",
        expected: Parse.pathExpected, parse: Parse.nonEmpty)
    public let vapidSubject = Setting<String>(
        "webpush.vapidSubject", "--vapid-subject", .push, value: "url",
        help: "A mailto: or https:// contact for Web Push services: turns Web Push (UnifiedPush) on.", expected: "mailto:ADDRESS or an https:// URL",
        parse: { text in
            (text.hasPrefix("mailto:") && text.count > 8 && text.contains("@")) || (text.hasPrefix("https://") && URL(string: text)?.host != nil)
                ? text : nil
        })
    public let vapidKeyFile = Setting<String>(
        "webpush.vapidKeyFile", "--vapid-key-file", .push, value: "file", help: "The VAPID key (EC P-256, PEM), created on first start.",
        default: "$CREDENTIALS_DIRECTORY/vapid-key, else countersign.vapid.pem beside the database", expected: Parse.pathExpected,
        parse: Parse.nonEmpty)
    public let pushAllowPrivateEndpoints = Setting(
        "pushAllowPrivateEndpoints", "--push-allow-private-endpoints", .push, value: nil,
        help:
            "Accept Web Push endpoints on private, loopback and link-local addresses, and http:// (tests, closed networks); the variable and key take \"on\".",
        expected: "on or off", parse: Parse.onOff, at: \.push.endpoints.allowsPrivate)
    public let pushPerHostInFlight = Setting(
        "pushPerHostInFlight", "--push-per-host-in-flight", .push, value: "count",
        help: "Sends in flight to one Web Push endpoint host: a host that never answers holds no more of the Web Push lane's 64.",
        expected: "a whole number from 1 to 1000", parse: Parse.whole(1...1000), at: \.push.perHostInFlight, show: { "\($0)" })
    public let sealedPush = Setting(
        "sealedPush", "--sealed-push", .push, value: "off|optional|required",
        help:
            "FCM and APNs pushes sealed end to end (HPKE) to each device's sealing key: optional seals them for devices with a key; required also sends devices without one no user data at all.",
        expected: "off, optional or required", parse: { SealedPushPolicy(rawValue: $0.lowercased()) }, at: \.push.sealedPush, show: \.rawValue)

    // MARK: Mail

    public let smtpURL = Setting<String>(
        "smtp.url", "--smtp-url", .mail, value: "url",
        help: "The SMTP submission server, smtp://HOST:587 (STARTTLS) or smtps://HOST:465 (implicit TLS): turns mail on.",
        expected: "an smtp:// or smtps:// URL", secret: true, parse: { $0 })
    public let smtpUser = Setting<String>(
        "smtp.user", "--smtp-user", .mail, value: "user", help: "The SMTP AUTH user.", expected: "a user name", parse: Parse.nonEmpty)
    public let smtpPasswordFile = Setting<String>(
        "smtp.passwordFile", "--smtp-password-file", .mail, value: "file", help: "File holding the SMTP password.",
        default: "$CREDENTIALS_DIRECTORY/\(EmailConfiguration.smtpPasswordCredential)", expected: Parse.pathExpected, parse: Parse.nonEmpty)
    public let smtpFrom = Setting<String>(
        "smtp.from", "--smtp-from", .mail, value: "address", help: "The sender: \"Example <noreply@example.com>\", say.",
        expected: "a sender address", parse: { $0 })
    public let smtpTLS = Setting<Bool>(
        "smtp.tls", "--smtp-tls", .mail, value: "required|none", help: "TLS to the SMTP server; none only to a relay on a loopback address.",
        default: "required", expected: "required or none", parse: { ["required": false, "none": true][$0.lowercased()] })
    public let smtpCAFile = Setting<String>(
        "smtp.caFile", "--smtp-ca-file", .mail, value: "file", help: "A CA bundle (PEM) to trust for the SMTP server instead of the system's.",
        expected: Parse.pathExpected, parse: Parse.nonEmpty)

    // MARK: Email reset

    public let publicURL = Setting<String?>(
        "publicURL", "--public-url", .emailReset, value: "url",
        help: "The daemon's address as users reach it, for the reset link.", expected: "an http(s) URL such as https://auth.example.com",
        parse: { (text: String) -> String?? in Parse.httpURL(text).flatMap { URL(string: $0)?.query == nil ? .some(.some($0)) : nil } },
        at: \.email.publicURL, default: "http:// and the listen address")
    public let resetLinkTemplate = Setting<ResetLinkTemplate?>(
        "resetLinkTemplate", "--reset-link-template", .emailReset, value: "template",
        help: "The reset link, with {token} and {email}: photosync://reset-password?token={token}&email={email}, say.",
        expected: "a URL with a {token} placeholder, e.g. photosync://reset-password?token={token}&email={email}",
        parse: { ResetLinkTemplate($0).map { .some($0) } }, at: \.email.linkTemplate, default: "the daemon's page")
    public let emailCodeTTL = Setting(
        "emailCodeTTL", "--email-code-ttl", .emailReset, value: "seconds", help: "Seconds an email reset code and link work.",
        expected: Parse.secondsExpected, parse: Parse.seconds, at: \.email.codeTTL, show: Parse.showSeconds)
    public let mailTemplates = Setting<String?>(
        "mailTemplates", "--mail-templates", .emailReset, value: "folder",
        help: "A folder with reset.txt.mustache and/or reset.html.mustache, replacing the built-in mail.", expected: "a folder",
        parse: { Parse.nonEmpty($0).map { .some($0) } }, at: \.email.templatesDirectory, default: "the built-in mail")

    /// The one table.
    public static let table = Settings()
    /// Every setting, in the order declared above (which is also the order `serve` reads them in).
    public static let all: [any AnySetting] = Mirror(reflecting: table).children.compactMap { $0.value as? any AnySetting }
    /// Each setting by its name in the table (`listen`, `fcmServiceAccount`): a command's option for a setting is named the same.
    public static let named: [String: SettingInfo] = Dictionary(
        uniqueKeysWithValues: Mirror(reflecting: table).children.compactMap { child in
            (child.value as? any AnySetting).flatMap { setting in child.label.map { ($0, setting.info) } }
        })
}

/// The parses settings share, and what they expect.
enum Parse {
    static let secondsExpected = "whole seconds from 1 to 86400"
    static let countExpected = "a whole number from 1 to 1000000"
    static let pathExpected = "a file path"
    static let appleIDExpected = "the 10 letters and digits Apple shows"

    static func whole(_ range: ClosedRange<Int>) -> @Sendable (String) -> Int? {
        { Int($0).flatMap { range.contains($0) ? $0 : nil } }
    }

    static func seconds(_ text: String) -> TimeInterval? {
        whole(1...86400)(text).map(TimeInterval.init)
    }

    static func showSeconds(_ seconds: TimeInterval) -> String { "\(Int(seconds))" }
    static func showSeconds(_ duration: Duration) -> String { "\(duration.components.seconds)" }

    static func onOff(_ text: String) -> Bool? {
        ["on": true, "off": false][text.lowercased()]
    }

    static func showOnOff(_ on: Bool) -> String { on ? "on" : "off" }

    static func nonEmpty(_ text: String) -> String? { text.isEmpty ? nil : text }

    static func listen(_ text: String) -> ListenAddress? {
        guard let colon = text.lastIndex(of: ":") else { return nil }
        var host = String(text[..<colon])
        if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        guard !host.isEmpty, let port = Int(text[text.index(after: colon)...]), (0...65535).contains(port) else { return nil }
        return ListenAddress(host: host, port: port)
    }

    static func httpURL(_ text: String) -> String? {
        URL(string: text).flatMap { ($0.scheme == "https" || $0.scheme == "http") && $0.host != nil ? text : nil }
    }

    static func nodeID(_ value: String) -> String? {
        (1...100).contains(value.count) && value.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || "-_.:".contains($0)) }
            ? value : nil
    }

    static func appleID(_ text: String) -> String? {
        text.count == 10 && text.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber) } ? text : nil
    }
}

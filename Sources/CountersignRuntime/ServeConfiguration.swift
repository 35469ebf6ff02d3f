import CountersignCore
import CountersignHTTP
import CountersignMail
import CountersignPush
import Foundation
import Logging

/// Everything `countersign serve` needs, after flags, environment and file are merged.
public struct ServeConfiguration: Sendable, Equatable {
    public var host = "127.0.0.1"
    public var port = 8080
    /// Where `/metrics` is served (`--metrics-listen`); `nil`: nowhere. Never
    /// on the public listener: its counters move per account.
    public var metricsListen: ListenAddress? = ListenAddress(host: "127.0.0.1", port: 9464)
    /// What `--database` says: a file path, or a `postgres://` URL (which may hold a password: never log it).
    public var databasePath: String
    /// `databasePath` parsed, with the PostgreSQL password from its file or credential.
    public var database: DatabaseLocation
    /// A cluster node's name (default: host name and port).
    public var nodeID: String?
    public var broker = BrokerConfiguration()
    public var bcryptCost = 12
    /// bcrypt jobs running or waiting at once; past it, 503 `unavailable`.
    public var bcryptQueue = BcryptPasswordHasher.defaultMaxQueued
    public var logLevel: Logger.Level = .info
    /// Limits by name; names not given keep their defaults.
    public var rateLimits: [RateLimitName: RateLimit] = [:]
    /// Peers whose `X-Forwarded-For` is believed.
    public var trustedProxies: [IPNetwork] = []
    /// How long audit events and finished requests are kept.
    public var retention: TimeInterval = 400 * 86400
    /// A connection with no request in flight this long is closed.
    public var idleTimeout: Duration = .seconds(75)
    /// A request (head and body) not arrived whole this long after its first byte is closed.
    public var requestTimeout: Duration = .seconds(30)
    /// Open connections per peer address (per /64 for IPv6); 0: no cap.
    public var connectionsPerAddress = 64
    /// Long polls held at once per client address; past it, polls are answered at once.
    public var longPollsPerAddress = 1000
    /// Long polls held at once on this node; past it, polls are answered at once.
    public var longPollsTotal = 100_000
    /// The most devices one user may have.
    public var maxDevicesPerUser = Device.defaultMaxPerUser
    /// FCM: off unless a service account is configured.
    public var push = PushConfiguration()
    /// How log lines are written (`--log-format`).
    public var logFormat = LogFormat.text
    /// Whether answers must be signed with a device key (default `optional`).
    public var deviceKeys = DeviceKeyPolicy.optional
    /// Whether devices get offline-code secrets and their codes are accepted (default on).
    public var offlineCodes = true
    /// The phone app's link scheme and authenticator issuer (`--app-link-scheme`, `--otp-issuer`).
    public var app = AppIdentity()
    /// The email reset: SMTP (off unless configured), link, templates, code lifetime, secret key.
    public var email = EmailConfiguration()

    /// How long a fraud report silences a user's prompts (a broker setting).
    public var fraudSilence: TimeInterval {
        get { broker.fraudSilence }
        set { broker.fraudSilence = newValue }
    }

    public init(databasePath: String) {
        self.databasePath = databasePath
        self.database = .sqlite(path: databasePath)
    }

    /// The API's address (`--listen`).
    public var listen: ListenAddress {
        get { ListenAddress(host: host, port: port) }
        set { (host, port) = (newValue.host, newValue.port) }
    }

    /// `http://` and the listen address: where links point without `--public-url`.
    public var listenURL: String {
        "http://\(host.contains(":") ? "[\(host)]" : host):\(port)"
    }

    /// What the start-up log line says about the settings in force (no secret is a setting).
    public var startupSummary: Logger.Metadata {
        [
            "version": "\(CountersignVersion.current)",
            "database": "\(database.display)",
            "listen": "\(host):\(port)",
            "metrics": "\(metricsListen.map { "\($0.host):\($0.port)" } ?? "off")",
            "requestTTL": "\(Int(broker.requestTTL))",
            "completionWindow": "\(Int(broker.completionWindow))",
            "numberMatching": "\(broker.numberMatching ? "required" : "off")",
            "deviceKeys": "\(deviceKeys.rawValue)",
            "offlineCodes": "\(offlineCodes ? "on" : "off")",
            "push": "\(push.summary)",
            "trustedProxies": "\(trustedProxies.map(\.description))",
            "mail": "\(email.smtp?.summary ?? "disabled (no SMTP server)")",
        ]
    }

    /// Where `serve` finds its secret key, and whether it may make it there: only the default place is made; a named
    /// file must exist, and a cluster's nodes must share one (given as a file or the `secret-key` credential).
    public func secretKeyLocation(environment: [String: String]) throws -> (path: String, mayCreate: Bool) {
        let path = email.secretKeyPath(databasePath: databasePath, environment: environment)
        let credential = environment["CREDENTIALS_DIRECTORY"].map { $0 + "/" + EmailConfiguration.secretKeyCredential }
        if database.isCluster, email.secretKeyFile == nil, path != credential {
            // Enrollment codes, idempotent answers and email codes made on one node are checked on another.
            throw ConfigurationError(
                "with a PostgreSQL database every node needs the same secret key: give --secret-key-file (or the systemd credential secret-key)")
        }
        return (path, email.secretKeyFile == nil)
    }

    /// `$STATE_DIRECTORY/countersign.sqlite` under systemd, else `./countersign.sqlite`.
    public static func defaultDatabasePath(environment: [String: String]) -> String {
        if let state = environment["STATE_DIRECTORY"]?.split(separator: ":").first, !state.isEmpty {
            return String(state) + "/countersign.sqlite"
        }
        return "./countersign.sqlite"
    }
}

/// A host and port to listen on.
public struct ListenAddress: Sendable, Equatable {
    public var host: String
    public var port: Int

    public init(host: String, port: Int) {
        self.host = host
        self.port = port
    }
}

extension PushConfiguration {
    /// The providers on, for the start-up line: `FCM (service account F), APNs (key K, team T), Web Push (VAPID key F)`.
    var summary: String {
        var parts: [String] = []
        if let file = serviceAccountFile { parts.append("FCM (service account \(file))") }
        if let apns { parts.append("APNs (key \(apns.keyID), team \(apns.teamID))") }
        if let webPush { parts.append("Web Push (VAPID key \(webPush.vapidKeyFile))") }
        if endpoints.allowsPrivate { parts.append("private endpoints allowed") }
        if !parts.isEmpty { parts.append("sealed push \(sealedPush.rawValue)") }
        return parts.isEmpty ? "disabled (no provider configured)" : parts.joined(separator: ", ")
    }
}

import CountersignCore
import CountersignServices
import Foundation

/// What the routes work with: built once by the runtime from its
/// configuration, then handed to ``buildRouter(_:)``.
/// Each part reaches the controllers and services only through the port it needs.
public struct AppDependencies: Sendable {
    public var store: any CountersignStorage
    public var broker: ApprovalBroker
    public var hasher: any PasswordHasher
    public var pushQueue: PushQueue
    public var pushSender: any PushSender
    public var audit: AuditLog
    public var metrics: AppMetrics
    public var rateLimits: LimitCounters
    /// Peers whose `X-Forwarded-For` is believed.
    public var trustedProxies: [IPNetwork]
    /// A hash of nothing anyone knows, verified for unknown emails so that they
    /// cost the same bcrypt time as a wrong password.
    public var decoyHash: String
    /// Long polls held at once, per client address and in all.
    public var longPolls: LongPollSlots
    /// A connection with no request in flight this long is closed.
    public var idleTimeout: Duration
    /// A request (head and body) not arrived whole this long after its first byte is closed.
    public var requestTimeout: Duration
    /// Open connections per peer address (per /64 for IPv6); 0: no cap. Trusted proxies are not capped.
    public var connectionsPerAddress: Int
    /// The email reset (codes, links, the mail queued with them).
    public var emailResets: EmailResets
    /// Where mail goes; `nil` when no SMTP server is configured (nothing is queued then).
    public var mail: (any MailSender)?
    /// Whether answers must be signed with a device key.
    public var deviceKeys: DeviceKeyPolicy
    /// The daemon's secret keys: hashes of codes, sealed outbox and idempotency answers.
    public var secretKeys: SecretKeys
    /// Where users and devices reach the daemon (`--public-url`, else the
    /// listen address), for enrollment URIs.
    public var publicURL: String
    /// The most devices one user may have.
    public var maxDevicesPerUser: Int
    /// Whether devices get offline-code secrets and their codes are accepted (`--offline-codes`).
    public var offlineCodes: Bool
    /// Which Web Push endpoints devices may register (`--push-allow-private-endpoints`).
    public var pushEndpoints: PushEndpointPolicy
    /// The phone app's link scheme and authenticator issuer (`--app-link-scheme`, `--otp-issuer`).
    public var app = AppIdentity()
    /// Rung when a relying service queues a test event or a redelivery, so it leaves at once.
    public var outboxBell: OutboxBell?

    public init(
        store: any CountersignStorage,
        broker: ApprovalBroker,
        hasher: any PasswordHasher,
        pushQueue: PushQueue,
        pushSender: any PushSender,
        audit: AuditLog,
        metrics: AppMetrics,
        rateLimits: LimitCounters,
        trustedProxies: [IPNetwork],
        decoyHash: String,
        emailResets: EmailResets,
        mail: (any MailSender)?,
        secretKeys: SecretKeys,
        publicURL: String = "http://127.0.0.1:8080",
        maxDevicesPerUser: Int = Device.defaultMaxPerUser,
        offlineCodes: Bool = true,
        pushEndpoints: PushEndpointPolicy = PushEndpointPolicy(),
        deviceKeys: DeviceKeyPolicy = .optional,
        longPolls: LongPollSlots = LongPollSlots(),
        idleTimeout: Duration = .seconds(75),
        requestTimeout: Duration = .seconds(30),
        connectionsPerAddress: Int = 64
    ) {
        self.connectionsPerAddress = connectionsPerAddress
        self.store = store
        self.broker = broker
        self.hasher = hasher
        self.pushQueue = pushQueue
        self.pushSender = pushSender
        self.audit = audit
        self.metrics = metrics
        self.rateLimits = rateLimits
        self.trustedProxies = trustedProxies
        self.decoyHash = decoyHash
        self.longPolls = longPolls
        self.idleTimeout = idleTimeout
        self.requestTimeout = requestTimeout
        self.emailResets = emailResets
        self.mail = mail
        self.deviceKeys = deviceKeys
        self.secretKeys = secretKeys
        self.publicURL = publicURL
        self.maxDevicesPerUser = maxDevicesPerUser
        self.offlineCodes = offlineCodes
        self.pushEndpoints = pushEndpoints
    }
}

import Logging

/// Delivers one push message to one device.
public protocol PushSender: Sendable {
    func send(_ job: PushJob, to device: Device, logger: Logger) async -> PushOutcome
    /// How push is doing, for `/healthz`.
    var health: PushHealth { get }
    /// Each configured provider's health; `/healthz` shows them one by one
    /// when more than one is configured.
    var providerHealth: [PushProvider: PushHealth] { get }
    /// What a device needs to subscribe: the providers on, and the VAPID key.
    var offer: PushOffer { get }
}

extension PushSender {
    public var health: PushHealth { .ok }
    public var providerHealth: [PushProvider: PushHealth] { [:] }
    public var offer: PushOffer { PushOffer(providers: []) }
}

/// The push object of `GET /api/mobile/push/config` and of the login and enroll
/// answers: which providers this daemon sends through and, with Web Push on,
/// the VAPID public key a UnifiedPush distributor is subscribed with.
public struct PushOffer: Sendable, Equatable, Encodable {
    public var providers: [PushProvider]
    /// Base64url of the uncompressed P-256 public key; `nil` with Web Push off.
    public var vapidPublicKey: String?

    public init(providers: [PushProvider], vapidPublicKey: String? = nil) {
        self.providers = providers
        self.vapidPublicKey = vapidPublicKey
    }
}

/// The `push` field of `/healthz`.
public enum PushHealth: String, Sendable {
    /// Push is configured and the last sends went through.
    case ok
    /// Push is not configured.
    case disabled
    /// A push gave up recently and none succeeded since.
    case degraded
    /// The push service refused our credentials, or does not know the project or
    /// endpoint we send to (a 404 naming no token), and nothing succeeded since: both
    /// are the operator's configuration to check, and http-api.md lists only these values.
    case authError = "auth_error"
}

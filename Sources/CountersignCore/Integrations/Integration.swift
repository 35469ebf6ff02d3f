import Foundation

/// A relying service: a backend of the deployment that asks for approvals
/// with its own API key and hears of their outcome through its webhook.
public struct Integration: Sendable, Equatable {
    public var id: String
    /// Unique; shown on the phone and named in the audit trail.
    public var name: String
    /// Where its events are posted; `nil` for none.
    public var webhookURL: String?
    /// Signs its events (`whsec_` and base64, as Standard Webhooks write it). Stored as is: it must sign.
    public var webhookSecret: String?
    /// A disabled integration's key is refused.
    public var enabled: Bool
    public var createdAt: Date
    /// The secret before the last `rotate-webhook-secret`, which signs too until `previousWebhookSecretUntil`.
    public var previousWebhookSecret: String?
    public var previousWebhookSecretUntil: Date?
    /// The operator let it prompt every user with a device (`--prompt-all-users`): a
    /// deployment's single sign-on or VPN. It gives no enrollment, listing or removal.
    public var promptsAllUsers: Bool
    /// When its receiver answered 410 Gone: no event is posted until a URL is set again.
    public var webhookDisabledAt: Date?
    /// Why (the answer and its host), for `integration list` and `GET /v1/webhook`.
    public var webhookDisabledReason: String?
    /// The relying service set the URL itself (`PUT /v1/webhook`): it is posted to over https, to
    /// public addresses only, checked again at each connection. A URL the operator set may name
    /// any host (a relying service on the same private network).
    public var webhookPublicOnly: Bool

    public init(
        id: String, name: String, webhookURL: String?, webhookSecret: String?, enabled: Bool, createdAt: Date,
        previousWebhookSecret: String? = nil, previousWebhookSecretUntil: Date? = nil, promptsAllUsers: Bool = false,
        webhookDisabledAt: Date? = nil, webhookDisabledReason: String? = nil, webhookPublicOnly: Bool = false
    ) {
        self.webhookPublicOnly = webhookPublicOnly
        self.webhookDisabledAt = webhookDisabledAt
        self.webhookDisabledReason = webhookDisabledReason
        self.promptsAllUsers = promptsAllUsers
        self.id = id
        self.name = name
        self.webhookURL = webhookURL
        self.webhookSecret = webhookSecret
        self.enabled = enabled
        self.createdAt = createdAt
        self.previousWebhookSecret = previousWebhookSecret
        self.previousWebhookSecretUntil = previousWebhookSecretUntil
    }

    /// How long a rotated-out webhook secret keeps signing beside the new one.
    public static let webhookSecretOverlap: TimeInterval = 24 * 3600

    /// The secrets that sign an event at `now`: the current one, and the previous one during its overlap.
    public func webhookSecrets(at now: Date) -> [String] {
        var secrets = webhookSecret.map { [$0] } ?? []
        if let previous = previousWebhookSecret, let until = previousWebhookSecretUntil, now < until { secrets.append(previous) }
        return secrets
    }

    /// An integration's API key: `csk_` and 256 random bits.
    public static func newAPIKey() -> String { "csk_" + SecureToken.generate(byteCount: 32) }
    /// A webhook signing secret as Standard Webhooks writes it: `whsec_` and 256 random bits in base64.
    public static func newWebhookSecret() -> String { "whsec_" + Data(SecureToken.randomBytes(32)).base64EncodedString() }
    /// A new integration id.
    public static func newID() -> String { "int_" + SecureToken.recordID() }

    /// `[A-Za-z0-9 _.-]{1,64}`, starting with a letter or digit.
    public static func isValidName(_ name: String) -> Bool {
        guard let first = name.utf8.first, (1...64).contains(name.utf8.count) else { return false }
        func alnum(_ c: UInt8) -> Bool { (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A) }
        return alnum(first) && name.utf8.allSatisfy { alnum($0) || $0 == 0x20 || $0 == 0x5F || $0 == 0x2E || $0 == 0x2D }
    }

    /// Why `text` cannot be a webhook URL, or `nil` when it can: `https://`
    /// with a host, or `http://` to a loopback host only.
    ///
    /// With `publicOnly` (a URL the relying service sets itself): `https://` only, and not to a
    /// loopback, private, link-local or metadata address or name (its addresses are checked again
    /// when it is connected to).
    public static func webhookURLProblem(_ text: String, publicOnly: Bool = false) -> String? {
        if publicOnly, text.utf8.count <= 2048 {
            if let url = URL(string: text), url.scheme?.lowercased() == "http" { return "only https:// webhook URLs are allowed" }
            if let problem = PushEndpointPolicy(allowsPrivate: false).problem(text) { return "a webhook URL \(problem)" }
        }
        guard text.utf8.count <= 2048, let url = URL(string: text), let scheme = url.scheme?.lowercased(), let host = url.host,
            !host.isEmpty
        else {
            return "\(text) is not an absolute URL"
        }
        if url.user != nil || url.password != nil { return "a webhook URL must not carry a user or password" }
        switch scheme {
        case "https": return nil
        case "http": return NetworkHost.isLoopback(host) ? nil : "only https:// webhook URLs are allowed, except to a loopback host"
        default: return "only https:// webhook URLs are allowed, except to a loopback host"
        }
    }
}

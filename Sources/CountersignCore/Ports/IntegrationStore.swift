import Foundation

/// Integrations, the users and enrollments they manage, their idempotency
/// keys and their webhook deliveries. Every method is one transaction, and
/// reads what is stored now: an operator's change takes effect at the next request.
public protocol IntegrationStore: Sendable {
    /// Stores a new integration with the hash of its API key; a name in use throws ``IntegrationError/nameTaken``.
    func createIntegration(_ integration: Integration, apiKeyHash: String) async throws
    func integrations() async throws -> [Integration]
    func integration(id: String) async throws -> Integration?
    /// The integration whose API key has this hash, enabled or not.
    func integration(apiKeyHash: String) async throws -> Integration?
    /// Replaces the key: the old one stops at once. `false` for an unknown id.
    func rotateIntegrationKey(id: String, apiKeyHash: String) async throws -> Bool
    /// A new webhook secret; the current one keeps signing beside it until `previousUntil`.
    /// `false` for an unknown id or one without a webhook.
    func rotateWebhookSecret(integrationID: String, secret: String, previousUntil: Date) async throws -> Bool
    /// Sets or (with `nil`) removes the webhook, and ends a disabling (a receiver's 410); `false` for an unknown id.
    /// `publicOnly`: the relying service set it (``Integration/webhookPublicOnly``).
    func setWebhook(integrationID: String, url: String?, secret: String?, publicOnly: Bool) async throws -> Bool
    /// Disabling voids the integration's unused enrollment codes, as rotating its key does.
    func setIntegrationEnabled(id: String, enabled: Bool) async throws -> Bool

    /// A user with no password (approvals only), owned by `integrationID`; an
    /// existing user is returned as is, with `created` false (and its owner unchanged).
    func ensureUser(email: String, integrationID: String) async throws -> (user: User, created: Bool)
    /// The user named `email`, whether the integration reaches it (created it, or was granted it),
    /// and whether it has a device at all: a create's three questions in one read.
    func user(email: String, promptableBy integrationID: String) async throws -> (user: User, reached: Bool, enrolled: Bool)?
    /// Whether the integration may still prompt user `userID`: own, granted, or (`all`) any user with a device.
    func integration(_ integrationID: String, reaches userID: String, all: Bool) async throws -> Bool
    /// `--prompt-all-users` on or off; `false` for an unknown id.
    func setPromptsAllUsers(integrationID: String, on: Bool) async throws -> Bool
    /// The user if the integration created it (a grant lets it enroll and list, not remove).
    func user(email: String, ownedBy integrationID: String) async throws -> User?
    /// Lets an integration enroll and list devices for a user it did not create; `false` if it already could.
    func grantUser(integrationID: String, userID: String, at: Date) async throws -> Bool
    /// Takes a grant back; `false` if there was none.
    func revokeGrant(integrationID: String, userID: String) async throws -> Bool
    func device(id: String) async throws -> Device?

    /// Stores a code, unless the integration is disabled or (with `apiKeyHash`)
    /// its key is no longer that one: a request authenticated just before a
    /// rotation cannot leave a code behind it. Whether it was stored.
    func createEnrollment(
        codeHash: String, userID: String, integrationID: String, apiKeyHash: String?, createdAt: Date, expiresAt: Date
    ) async throws -> Bool
    /// In one transaction: uses an unused, unexpired code of an enabled
    /// integration that still reaches its user, and registers the device
    /// `registration(userID)` describes. `nil` for a code not valid; a throw
    /// (``AccountError/tooManyDevices``, say) leaves the code usable.
    func enroll(
        codeHash: String, now: Date, maxDevices: Int, registration: @escaping @Sendable (_ userID: String) -> DeviceRegistration
    ) async throws -> (device: Device, integrationID: String)?

    /// The stored create under this key, if it was made after `since`.
    func idempotencyRecord(integrationID: String, key: String, since: Date) async throws -> IdempotencyRecord?

    /// Webhook deliveries, newest first: every integration's, or (with `integrationID`) one's own;
    /// with `failedOnly`, those that failed, were dropped or are being retried.
    func webhookDeliveries(integrationID: String?, failedOnly: Bool, limit: Int) async throws -> [OutboxEntry]
    /// Queues an event again, due now, for another `WebhookEvent.deliveryWindow` (with `integrationID`,
    /// only one of its own); what it is about (an approval's id, or the integration's for a test event),
    /// or `nil` for an unknown event (or one being sent).
    /// A relying service (`finishedOnly`) sends again only an event whose delivery ended: one still
    /// being retried keeps its attempts and its window.
    func redeliverWebhook(eventID: String, integrationID: String?, finishedOnly: Bool, now: Date) async throws -> String?
    /// Queues a test event (``WebhookEvent/ping(for:at:)``) if the integration has a webhook that is not
    /// disabled and no test event of its own is still waiting; whether it was queued.
    func queueWebhookPing(_ item: OutboxItem, integrationID: String) async throws -> Bool
    /// Disables the webhook after its receiver answered 410 Gone, if its URL is still `url` and it is not
    /// disabled yet: a URL set since then is not disabled by the old one's answer. `audit` is appended in the same
    /// transaction, only when it was disabled now; whether it was.
    func disableWebhook(integrationID: String, url: String, reason: String, at: Date, audit: AuditEvent) async throws -> Bool
}

extension IntegrationStore {
    /// The user if the integration created it or the operator granted it to the integration.
    public func user(email: String, reachableBy integrationID: String) async throws -> User? {
        try await user(email: email, promptableBy: integrationID).flatMap { $0.reached ? $0.user : nil }
    }

    /// Sets or removes the webhook as the operator does: any host.
    public func setWebhook(integrationID: String, url: String?, secret: String?) async throws -> Bool {
        try await setWebhook(integrationID: integrationID, url: url, secret: secret, publicOnly: false)
    }

    /// A code for an enabled integration, whatever its key.
    public func createEnrollment(codeHash: String, userID: String, integrationID: String, createdAt: Date, expiresAt: Date) async throws {
        _ = try await createEnrollment(
            codeHash: codeHash, userID: userID, integrationID: integrationID, apiKeyHash: nil, createdAt: createdAt, expiresAt: expiresAt)
    }
}

public enum IntegrationError: Error, Equatable {
    case nameTaken
}

/// One outbox row as the operator sees it.
public struct OutboxEntry: Sendable, Equatable {
    public var id: String
    public var kind: OutboxKind
    public var reference: String?
    /// `pending`, `delivered`, `failed` or `dropped`.
    public var state: String
    public var attempts: Int
    public var createdAt: Date
    public var nextAttemptAt: Date
    public var finishedAt: Date?
    public var lastError: String?
    /// A webhook's event body; `nil` for mail (sealed, erased once sent).
    public var payload: Data?

    public init(
        id: String, kind: OutboxKind, reference: String?, state: String, attempts: Int, createdAt: Date, nextAttemptAt: Date, finishedAt: Date?,
        lastError: String?, payload: Data?
    ) {
        self.id = id
        self.kind = kind
        self.reference = reference
        self.state = state
        self.attempts = attempts
        self.createdAt = createdAt
        self.nextAttemptAt = nextAttemptAt
        self.finishedAt = finishedAt
        self.lastError = lastError
        self.payload = payload
    }
}

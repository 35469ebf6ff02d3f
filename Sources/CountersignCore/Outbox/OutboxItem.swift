import Foundation

/// What leaves the process through the outbox.
public enum OutboxKind: String, Sendable, CaseIterable {
    /// A mail (email reset); its payload is a sealed ``ResetMailPayload``.
    case mail
    /// An integration's webhook event; its payload is the event's JSON body
    /// (no secret in it), kept after delivery so that it can be sent again.
    case webhook
}

/// One row of the outbox: written in the same transaction as the change that
/// causes it, then claimed and delivered at least once by ``OutboxDeliverer``s.
public struct OutboxItem: Sendable, Equatable {
    public var id: String
    public var kind: OutboxKind
    /// What it belongs to (an email reset's id, an approval's id): replacing
    /// an email reset drops its mail; a webhook waits for the earlier events of its approval.
    public var reference: String?
    /// For the audit trail.
    public var userID: String?
    /// A webhook event's integration: whom it is posted to, and who may list and redeliver it.
    public var integrationID: String?
    /// A mail's is sealed with ``SecretKeys/seal(_:)``: the database never holds it in clear.
    public var payload: Data
    public var createdAt: Date
    public var nextAttemptAt: Date
    /// Past it, the item is useless (the code expired): dropped, not sent.
    public var deadline: Date
    /// Attempts so far, this one included once claimed.
    public var attempts: Int

    public init(
        id: String, kind: OutboxKind, reference: String?, userID: String?, payload: Data, createdAt: Date, nextAttemptAt: Date,
        deadline: Date, attempts: Int = 0, integrationID: String? = nil
    ) {
        self.integrationID = integrationID
        self.id = id
        self.kind = kind
        self.reference = reference
        self.userID = userID
        self.payload = payload
        self.createdAt = createdAt
        self.nextAttemptAt = nextAttemptAt
        self.deadline = deadline
        self.attempts = attempts
    }
}

/// How an item's life ended.
public enum OutboxEnd: String, Sendable {
    /// The receiver accepted it.
    case delivered
    /// The receiver refused it for good (SMTP 5xx), or it cannot be sent (no webhook URL any more): not retried.
    case failed
    /// Given up: its deadline passed, or what it belonged to was replaced.
    case dropped
}

/// The outcome of one delivery attempt.
public enum DeliveryResult: Sendable, Equatable {
    case delivered(String)
    /// Worth another try later (SMTP 4xx, a connection error).
    case retry(String)
    /// Not worth another try.
    case failed(String)
}

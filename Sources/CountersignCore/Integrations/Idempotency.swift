import Foundation

/// A create carrying an `Idempotency-Key`: stored with the approval it made,
/// in the same transaction, so that a repeat finds the first answer.
public struct IdempotencyRecord: Sendable, Equatable {
    public var integrationID: String
    public var key: String
    /// SHA-256 of the create's meaning (its fields, normalised): a repeat with another body is refused.
    public var requestHash: String
    public var approvalID: String
    /// The first answer, sealed (it holds the number code).
    public var answer: Data
    public var createdAt: Date

    public init(integrationID: String, key: String, requestHash: String, approvalID: String, answer: Data, createdAt: Date) {
        self.integrationID = integrationID
        self.key = key
        self.requestHash = requestHash
        self.approvalID = approvalID
        self.answer = answer
        self.createdAt = createdAt
    }

    /// How long a key is remembered.
    public static let window: TimeInterval = 24 * 3600
    /// The longest key accepted.
    public static let maxKeyLength = 255
}

/// Another create with the same key got there first: read its record.
public struct IdempotencyKeyTaken: Error, Equatable {
    public init() {}
}

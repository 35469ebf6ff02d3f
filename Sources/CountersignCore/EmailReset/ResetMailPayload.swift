import Foundation

/// What the outbox keeps (sealed) for a reset mail until it is sent.
public struct ResetMailPayload: Codable, Sendable, Equatable {
    public var to: String
    public var code: String
    public var token: String
    public var expiresAt: Date

    public init(to: String, code: String, token: String, expiresAt: Date) {
        self.to = to
        self.code = code
        self.token = token
        self.expiresAt = expiresAt
    }
}

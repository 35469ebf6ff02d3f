import Foundation

/// What the outbox keeps (sealed) for a reset mail until it is sent.
public struct ResetMailPayload: Codable, Sendable, Equatable {
    public var to: String
    public var code: String
    public var token: String
    public var expiresAt: Date
    /// The names of the devices signed in to the account when the code was issued
    /// (absent in mail queued by an older version).
    public var devices: [String]?

    public init(to: String, code: String, token: String, expiresAt: Date, devices: [String]? = nil) {
        self.to = to
        self.code = code
        self.token = token
        self.expiresAt = expiresAt
        self.devices = devices
    }
}

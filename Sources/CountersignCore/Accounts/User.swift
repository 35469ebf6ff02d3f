import Foundation

/// An account: its password (bcrypt) and whether a fraud report silenced its prompts.
public struct User: Sendable, Equatable {
    public var id: String
    /// Normalised: trimmed and lower-cased.
    public var email: String
    public var passwordHash: String
    public var createdAt: Date
    /// After a fraud report: until then, this user's requests prompt no device.
    public var silencedUntil: Date?
    /// The integration that created this user (no password); `nil` for a password user.
    public var ownerIntegrationID: String?

    public init(
        id: String, email: String, passwordHash: String, createdAt: Date, silencedUntil: Date? = nil, ownerIntegrationID: String? = nil
    ) {
        self.id = id
        self.email = email
        self.passwordHash = passwordHash
        self.createdAt = createdAt
        self.silencedUntil = silencedUntil
        self.ownerIntegrationID = ownerIntegrationID
    }

    /// The bcrypt hash to check a password against: `nil` for a user an
    /// integration created, who has none (stored empty) and signs in by enrollment only.
    public var passwordHashIfAny: String? { passwordHash.isEmpty ? nil : passwordHash }

    public func isSilenced(at now: Date) -> Bool {
        silencedUntil.map { $0 > now } ?? false
    }

    /// The form under which emails are stored and compared.
    public static func normalize(email: String) -> String {
        email.trimmingWhitespace().lowercased()
    }
}

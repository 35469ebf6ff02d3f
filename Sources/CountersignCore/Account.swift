import Foundation

public struct User: Sendable, Equatable {
    public var id: String
    /// Normalised: trimmed and lower-cased.
    public var email: String
    public var passwordHash: String
    public var createdAt: Date
    /// After a fraud report: until then, this user's requests prompt no device.
    public var silencedUntil: Date?

    public init(id: String, email: String, passwordHash: String, createdAt: Date, silencedUntil: Date? = nil) {
        self.id = id
        self.email = email
        self.passwordHash = passwordHash
        self.createdAt = createdAt
        self.silencedUntil = silencedUntil
    }

    public func isSilenced(at now: Date) -> Bool {
        silencedUntil.map { $0 > now } ?? false
    }

    /// The form under which emails are stored and compared.
    public static func normalize(email: String) -> String {
        email.trimmingCharacters(in: .whitespacesAndNewlines).lowercased()
    }
}

/// A trusted device: it holds an API key (stored as SHA-256) and may approve.
public struct Device: Sendable, Equatable {
    public var id: String
    public var userID: String
    public var name: String
    public var platform: String
    /// The FCM registration token; `nil` for a pull-only device.
    public var fcmToken: String?
    /// False once FCM said the token is dead; a new token revives it.
    public var pushEnabled: Bool
    public var createdAt: Date

    public init(
        id: String,
        userID: String,
        name: String,
        platform: String,
        fcmToken: String?,
        pushEnabled: Bool,
        createdAt: Date
    ) {
        self.id = id
        self.userID = userID
        self.name = name
        self.platform = platform
        self.fcmToken = fcmToken
        self.pushEnabled = pushEnabled
        self.createdAt = createdAt
    }

    /// A token is usable for push when present and not a placeholder the apps send.
    public static func pushToken(from raw: String?) -> String? {
        guard let token = raw?.trimmingCharacters(in: .whitespacesAndNewlines),
            !token.isEmpty, token.lowercased() != "unknown"
        else { return nil }
        return token
    }

    /// Only the last characters of a push token ever reach a log.
    public static func tokenSuffix(_ token: String) -> String {
        "…" + String(token.suffix(6))
    }
}

/// New password rules of the API: at least 8 characters, at most 72 bytes of
/// UTF-8 (bcrypt ignores anything past 72 bytes).
public enum PasswordPolicy {
    public static let minimumCharacters = 8
    public static let maximumBytes = 72

    /// A sentence naming the broken rule, or `nil` when the password is acceptable.
    public static func violation(of password: String) -> String? {
        if password.count < minimumCharacters {
            return "The new password must have at least \(minimumCharacters) characters."
        }
        if password.utf8.count > maximumBytes {
            return "The new password must be at most \(maximumBytes) bytes long."
        }
        return nil
    }
}

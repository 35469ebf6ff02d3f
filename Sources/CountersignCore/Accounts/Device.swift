import Foundation

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
    /// The P-256 key its answers are signed with; `nil` for a device that answers with its API key alone.
    public var publicKey: DeviceKey?
    /// When it last used its API key (to within a minute).
    public var lastSeenAt: Date?

    public init(
        id: String,
        userID: String,
        name: String,
        platform: String,
        fcmToken: String?,
        pushEnabled: Bool,
        createdAt: Date,
        publicKey: DeviceKey? = nil,
        lastSeenAt: Date? = nil
    ) {
        self.id = id
        self.userID = userID
        self.name = name
        self.platform = platform
        self.fcmToken = fcmToken
        self.pushEnabled = pushEnabled
        self.createdAt = createdAt
        self.publicKey = publicKey
        self.lastSeenAt = lastSeenAt
    }

    /// How stale `lastSeenAt` may get before a request writes it again.
    public static let lastSeenResolution: TimeInterval = 60

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

import CountersignWire
import Foundation

/// A trusted device: it holds an API key (stored as SHA-256) and may approve.
public struct Device: Sendable, Equatable {
    public var id: String
    public var userID: String
    public var name: String
    public var platform: String
    /// Where its pushes go (FCM, APNs or Web Push); `nil` for a pull-only device.
    public var push: PushAddress?
    /// False once the push service said the token or endpoint is dead; a new one revives it.
    public var pushEnabled: Bool
    public var createdAt: Date
    /// The P-256 key its answers are signed with; `nil` for a device that answers with its API key alone.
    public var publicKey: DeviceKey?
    /// When it last used its API key (to within a minute).
    public var lastSeenAt: Date?
    /// Whether it may answer a password reset: the user signed in on it with
    /// the password. A device an integration enrolled may not.
    public var mayApproveResets: Bool
    /// The secret its offline codes are made from, sealed with the daemon's
    /// key (``SecretKeys/sealDeviceSecret(_:)``); `nil` with offline codes off.
    public var offlineSecret: Data?
    /// The key its FCM and APNs pushes are sealed to; `nil`: they go readable (or bare under `--sealed-push required`).
    public var sealKey: SealKey?

    public init(
        id: String,
        userID: String,
        name: String,
        platform: String,
        push: PushAddress?,
        pushEnabled: Bool,
        createdAt: Date,
        publicKey: DeviceKey? = nil,
        lastSeenAt: Date? = nil,
        mayApproveResets: Bool = true,
        offlineSecret: Data? = nil,
        sealKey: SealKey? = nil
    ) {
        self.id = id
        self.userID = userID
        self.name = name
        self.platform = platform
        self.push = push
        self.pushEnabled = pushEnabled
        self.createdAt = createdAt
        self.publicKey = publicKey
        self.lastSeenAt = lastSeenAt
        self.mayApproveResets = mayApproveResets
        self.offlineSecret = offlineSecret
        self.sealKey = sealKey
    }

    /// The most devices a user may have unless configured otherwise.
    public static let defaultMaxPerUser = 20

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

/// A device to register, at login or enrollment.
public struct DeviceRegistration: Sendable {
    public var userID: String
    public var name: String
    public var platform: String
    public var push: PushAddress?
    public var apiKeyHash: String
    public var publicKey: DeviceKey?
    /// A login (with the password) may approve resets; an enrollment may not.
    public var mayApproveResets: Bool
    /// Its sealed offline-code secret (``OfflineSecrets``); `nil` with offline codes off.
    public var offlineSecret: Data?
    /// The key its pushes are sealed to, if it sent one.
    public var sealKey: SealKey?
    /// Who registers it: a device it replaces is audited (`device_replaced`) in the same transaction.
    public var auditContext: AuditContext = .system

    public init(
        userID: String, name: String, platform: String, push: PushAddress?, apiKeyHash: String, publicKey: DeviceKey?, mayApproveResets: Bool,
        offlineSecret: Data? = nil, sealKey: SealKey? = nil
    ) {
        self.userID = userID
        self.name = name
        self.platform = platform
        self.push = push
        self.apiKeyHash = apiKeyHash
        self.publicKey = publicKey
        self.mayApproveResets = mayApproveResets
        self.offlineSecret = offlineSecret
        self.sealKey = sealKey
    }
}

extension Device {
    /// A device registered for the first time: a new id; push on when it has an address.
    public init(_ registration: DeviceRegistration, push: PushAddress?, at now: Date = Date()) {
        self.init(
            id: SecureToken.recordID(), userID: registration.userID, name: registration.name, platform: registration.platform, push: push,
            pushEnabled: push != nil, createdAt: now, publicKey: registration.publicKey, mayApproveResets: registration.mayApproveResets,
            offlineSecret: registration.offlineSecret, sealKey: registration.sealKey)
    }

    /// Whether a request now should record it as seen: at most once per ``lastSeenResolution``,
    /// so that most requests stay reads.
    public func isDueToBeSeen(at now: Date) -> Bool {
        (lastSeenAt.map { now.timeIntervalSince($0) } ?? .infinity) >= Self.lastSeenResolution
    }
}

extension User {
    /// The cost of a bcrypt hash from its first characters (`$2b$12$`: 12).
    public static func passwordHashCost(prefix: String) -> Int? {
        Int(prefix.split(separator: "$").dropFirst().first ?? "")
    }
}

extension DeviceRegistration {
    /// The audit row of `replaced`, the device whose push address this registration brought,
    /// written in the registration's transaction.
    public func replacementEvent(of replaced: Device, by device: Device) -> AuditEvent {
        var context = auditContext
        context.deviceID = replaced.id
        return AuditEvent(
            kind: .deviceReplaced, userID: userID, context: context,
            detail: "signed out: a login brought its push address; new device \(device.id)")
    }
}

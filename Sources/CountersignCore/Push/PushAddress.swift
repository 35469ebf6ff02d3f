import Crypto
import Foundation

/// The push services a device can be reached through.
public enum PushProvider: String, Sendable, CaseIterable, Codable, Comparable {
    /// Firebase Cloud Messaging HTTP v1.
    case fcm
    /// Apple Push Notification service, with a token-based (`.p8`) provider key.
    case apns
    /// Web Push (RFC 8030) with an encrypted payload (RFC 8291) and VAPID (RFC 8292): UnifiedPush distributors.
    case webPush = "webpush"

    public static func < (lhs: Self, rhs: Self) -> Bool {
        allCases.firstIndex(of: lhs)! < allCases.firstIndex(of: rhs)!
    }
}

/// Where a device's pushes go: its provider and what that provider needs.
public struct PushAddress: Sendable, Equatable {
    public enum APNsEnvironment: String, Sendable, Codable {
        case production, sandbox
    }

    public var provider: PushProvider
    /// The FCM registration token, the APNs device token (lowercase hex) or the
    /// Web Push endpoint: what names one device, whoever's it is.
    public var token: String
    /// APNs: the app's bundle id (`apns-topic`) and its environment.
    public var apnsTopic: String?
    public var apnsEnvironment: APNsEnvironment?
    /// Web Push: the subscription's P-256 public key (65 bytes, uncompressed) and its 16-byte auth secret.
    public var webPushKey: Data?
    public var webPushAuth: Data?

    public static func fcm(_ token: String) -> PushAddress {
        PushAddress(provider: .fcm, token: token)
    }

    public static func apns(token: String, topic: String, environment: APNsEnvironment) -> PushAddress {
        PushAddress(provider: .apns, token: token.lowercased(), apnsTopic: topic, apnsEnvironment: environment)
    }

    public static func webPush(endpoint: String, key: Data, auth: Data) -> PushAddress {
        PushAddress(provider: .webPush, token: endpoint, webPushKey: key, webPushAuth: auth)
    }

    init(
        provider: PushProvider, token: String, apnsTopic: String? = nil, apnsEnvironment: APNsEnvironment? = nil, webPushKey: Data? = nil,
        webPushAuth: Data? = nil
    ) {
        self.provider = provider
        self.token = token
        self.apnsTopic = apnsTopic
        self.apnsEnvironment = apnsEnvironment
        self.webPushKey = webPushKey
        self.webPushAuth = webPushAuth
    }

    /// The last characters of the token or endpoint: all of it a log or an answer ever shows.
    public var suffix: String { Device.tokenSuffix(token) }

    /// `provider …suffix`, for audit details and logs.
    public var described: String { "\(provider.rawValue) \(suffix)" }
}

// MARK: - Stored form

extension PushAddress {
    /// What the provider needs besides the token, as both stores keep it: JSON
    /// text with sorted keys (`nil` for FCM, which needs nothing more).
    public var storedOptions: String? {
        let options = StoredOptions(
            topic: apnsTopic, environment: apnsEnvironment, p256dh: webPushKey.map(SecureToken.base64URL),
            auth: webPushAuth.map(SecureToken.base64URL))
        guard options != StoredOptions() else { return nil }
        return (try? Self.storedEncoder.encode(options)).map { String(decoding: $0, as: UTF8.self) }
    }

    /// The provider column's value for `push` (`fcm` for none: the column's default, as rows written before providers).
    public static func storedProvider(of push: PushAddress?) -> String {
        (push?.provider ?? .fcm).rawValue
    }

    /// The address a row holds; `nil` when it holds no token, or one this
    /// version cannot use (a provider it does not know, options it cannot
    /// read: a row written by a newer release): that device is pull only here,
    /// and the user's other devices stay readable.
    public init?(storedProvider: String?, token: String?, options: String?) {
        guard let token, let provider = PushProvider(rawValue: storedProvider ?? PushProvider.fcm.rawValue) else { return nil }
        guard let stored = options.map({ try? JSONDecoder().decode(StoredOptions.self, from: Data($0.utf8)) }) ?? StoredOptions() else {
            return nil
        }
        self.init(
            provider: provider, token: token, apnsTopic: stored.topic, apnsEnvironment: stored.environment,
            webPushKey: stored.p256dh.flatMap(DeviceKey.decode), webPushAuth: stored.auth.flatMap(DeviceKey.decode))
    }

    struct StoredOptions: Codable, Equatable {
        var topic: String?
        var environment: APNsEnvironment?
        var p256dh: String?
        var auth: String?
    }

    private static let storedEncoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }()
}

// MARK: - Checking what a device sends

extension PushAddress {
    /// A problem with one field of a push address a device sent: the field's name and what is wrong.
    public struct Problem: Error, Equatable, Sendable {
        public let field: String
        public let message: String
    }

    /// The longest token or endpoint accepted.
    public static let maximumTokenBytes = 4096

    /// An APNs address: a device token of at least 64 hex digits, a bundle id, an environment.
    public static func checkedAPNs(token: String, topic: String, environment: String?) throws(Problem) -> PushAddress {
        let hex = token.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x41 && $0 <= 0x46) || ($0 >= 0x61 && $0 <= 0x66) }
        guard hex, token.utf8.count >= 64, token.utf8.count <= 400, token.utf8.count % 2 == 0 else {
            throw Problem(field: "token", message: "must be an APNs device token: 64 or more hexadecimal digits")
        }
        guard topic.utf8.count <= 255, isBundleID(topic) else {
            throw Problem(field: "topic", message: "must be the app's bundle id (letters, digits, '.', '-' and '_')")
        }
        guard let environment = APNsEnvironment(rawValue: environment ?? APNsEnvironment.production.rawValue) else {
            throw Problem(field: "environment", message: "must be \"production\" or \"sandbox\"")
        }
        return .apns(token: token, topic: topic, environment: environment)
    }

    /// A Web Push subscription: its endpoint (checked by ``PushEndpointPolicy``),
    /// `p256dh` a P-256 public key and `auth` 16 bytes, both base64url.
    public static func checkedWebPush(endpoint: String, p256dh: String, auth: String, policy: PushEndpointPolicy) throws(Problem) -> PushAddress {
        if let problem = policy.problem(endpoint) { throw Problem(field: "endpoint", message: problem) }
        guard let key = unpadded(p256dh).flatMap(DeviceKey.decode), key.count == 65,
            (try? P256.KeyAgreement.PublicKey(x963Representation: key)) != nil
        else {
            throw Problem(field: "p256dh", message: "must be an uncompressed P-256 public key (65 bytes, base64url)")
        }
        guard let secret = unpadded(auth).flatMap(DeviceKey.decode), secret.count == 16 else {
            throw Problem(field: "auth", message: "must be 16 bytes, base64url")
        }
        return .webPush(endpoint: endpoint, key: key, auth: secret)
    }

    /// Base64url as written, with any trailing `=` (some browsers add them) taken off; bounded.
    static func unpadded(_ text: String) -> String? {
        guard text.utf8.count <= 200 else { return nil }
        var text = Substring(text)
        while text.hasSuffix("=") { text = text.dropLast() }
        return String(text)
    }

    static func isBundleID(_ text: String) -> Bool {
        !text.isEmpty
            && text.utf8.allSatisfy {
                ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x41 && $0 <= 0x5A) || ($0 >= 0x61 && $0 <= 0x7A) || $0 == 0x2E || $0 == 0x2D || $0 == 0x5F
            }
    }
}

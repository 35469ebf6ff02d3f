import CountersignCore
import Crypto
import Foundation

/// A request waiting for this device's answer, as `GET /api/mobile/approvals/pending` lists it.
public struct PendingApproval: Decodable, Sendable, Equatable {
    public struct Requester: Decodable, Sendable, Equatable {
        /// Where the request came from, as the daemon (or the relying service) saw it.
        public var ip: String
        /// The requesting program, when it said.
        public var userAgent: String?
    }

    /// The relying service that asked.
    public struct Integration: Decodable, Sendable, Equatable {
        /// Its name, as the operator gave it.
        public var name: String
    }

    /// The request's id: the requester's credential too, so show it to no one and log only a hash of it.
    public var requestId: String
    /// `password_reset`, or the action a relying service named.
    public var action: String
    /// When it was made (ISO 8601).
    public var createdAt: String
    /// When it stops waiting (ISO 8601): answer before.
    public var expiresAt: String
    /// Whether approving needs the number shown on the requesting screen.
    public var numberMatching: Bool
    /// Who asked, as far as the daemon knows.
    public var requester: Requester
    /// A relying service's words (absent for a password reset): the prompt's title,
    public var title: String?
    /// its text,
    public var body: String?
    /// and the details it asked to show (say, the amount and the payee).
    public var context: [String: String]?
    /// The relying service that asked; absent for a password reset.
    public var integration: Integration?
    /// Its state (`pending`, `approved`, …) when read one by one (``CountersignDevice/approval(_:)``); absent in the pending list.
    public var status: String?
}

/// A device's answer.
public enum Decision: String, Sendable, Codable {
    /// Yes, this was me.
    case approve
    /// No; with `reportFraud`, "this was not me".
    case deny
}

/// What a prompt's push says: what the prompt screen shows before the app asks for more.
public struct PromptNotice: Sendable, Equatable {
    public var requestID: String
    public var action: String
    /// When the request expires (RFC 3339).
    public var expiresAt: String
    /// The notification's words: the relying service's title and text, or the daemon's for a password reset.
    public var title: String?
    public var body: String?
    /// The relying service's name, for its approvals.
    public var integration: String?
    /// What the relying service says of the request (where, from which address, ...); empty when it said nothing
    /// or the push had no room for it (``CountersignDevice/approval(_:)`` has it).
    public var context: [String: String]

    public init(
        requestID: String, action: String, expiresAt: String, title: String? = nil, body: String? = nil, integration: String? = nil,
        context: [String: String] = [:]
    ) {
        self.requestID = requestID
        self.action = action
        self.expiresAt = expiresAt
        self.title = title
        self.body = body
        self.integration = integration
        self.context = context
    }
}

/// What a push to the device says, as the app gets it: FCM's `data`, an APNs notification's
/// `userInfo`, a Web Push payload, or a sealed push opened with the device's sealing key.
public enum DeviceNotice: Sendable, Equatable {
    /// Show a prompt: a request waits for this device.
    case approvalRequest(PromptNotice)
    /// Take down the prompt of this request: it was answered (here or elsewhere), cancelled or expired.
    case approvalResolved(requestID: String, status: String)
    /// A new device joined the account: tell the user, who can remove it if it is not theirs.
    case deviceAdded(name: String, platform: String, at: String)
    /// Too many wrong codes for the account today: codes are refused until the operator unlocks it or the day ends.
    case codesLocked

    /// The notice in an APNs notification's `userInfo` (`UNNotificationContent.userInfo`, or the
    /// dictionary `application(_:didReceiveRemoteNotification:)` gets): its top-level string members
    /// beside `aps`. With `sealKey`, a sealed one is opened (``init(sealedPushData:sealKey:)``).
    public init?(userInfo: [AnyHashable: Any], sealKey: P256.KeyAgreement.PrivateKey? = nil) {
        var data: [String: String] = [:]
        for (key, value) in userInfo {
            if let key = key as? String, let value = value as? String { data[key] = value }
        }
        // A readable prompt's words are its alert's (the data keeps only a relying service's own).
        if data["sealed"] == nil, let alert = (userInfo["aps"] as? [String: Any])?["alert"] as? [String: Any] {
            if data["title"] == nil, let title = alert["title"] as? String { data["title"] = title }
            if data["body"] == nil, let body = alert["body"] as? String { data["body"] = body }
        }
        if let sealKey {
            self.init(sealedPushData: data, sealKey: sealKey)
        } else {
            self.init(pushData: data)
        }
    }

    /// The notice in a sealed push's data (FCM's data, or an APNs payload's members): its
    /// `sealed` part opened with the device's sealing key (``DeviceKeyStore/sealingKey()``),
    /// bound to its request. A push that is not sealed is read as ``init(pushData:)`` reads it;
    /// `nil` for one that does not open (not for this key, or altered) or is no notice.
    public init?(sealedPushData data: [String: String], sealKey: P256.KeyAgreement.PrivateKey) {
        guard let sealed = data["sealed"] else {
            self.init(pushData: data)
            return
        }
        guard data["v"] == PushSeal.version,
            let plaintext = try? PushSeal.open(sealed, with: sealKey, aad: data["requestId"] ?? ""),
            let opened = (try? JSONSerialization.jsonObject(with: plaintext)) as? [String: String],
            opened["type"] == data["type"], opened["requestId"] == data["requestId"]
        else { return nil }
        self.init(pushData: opened)
    }

    /// The notice in a push's data; `nil` for anything else.
    public init?(pushData data: [String: String]) {
        switch data["type"] {
        case "approval_request":
            guard let id = data["requestId"], let action = data["action"], let expiresAt = data["expiresAt"] else { return nil }
            let context = data["context"].flatMap { (try? JSONSerialization.jsonObject(with: Data($0.utf8))) as? [String: String] }
            self = .approvalRequest(
                PromptNotice(
                    requestID: id, action: action, expiresAt: expiresAt, title: data["title"], body: data["body"], integration: data["integration"],
                    context: context ?? [:]))
        case "approval_resolved":
            guard let id = data["requestId"], let status = data["status"] else { return nil }
            self = .approvalResolved(requestID: id, status: status)
        case "device_added":
            guard let name = data["deviceName"], let platform = data["platform"], let at = data["at"] else { return nil }
            self = .deviceAdded(name: name, platform: platform, at: at)
        case "codes_locked":
            self = .codesLocked
        default:
            return nil
        }
    }
}

/// Why a call failed.
public enum DeviceError: Error, Equatable, CustomStringConvertible {
    /// The daemon answered with an error body: its status, `error` code and sentence.
    case refused(status: Int, error: String, message: String)
    /// No credentials in the key store for this daemon: sign in or enroll first.
    case notSignedIn
    /// The key store could not be read or written.
    case keyStore(String)
    /// The daemon's answer was not what the contract says.
    case unexpectedAnswer(String)

    /// One line for a person.
    public var description: String {
        switch self {
        case .refused(let status, let error, let message): "\(status) \(error): \(message)"
        case .notSignedIn: "not signed in: sign in or enroll first"
        case .keyStore(let reason): reason
        case .unexpectedAnswer(let what): "unexpected answer: \(what)"
        }
    }
}

/// Where a device's pushes go, as it tells the daemon.
public enum PushRegistration: Sendable, Equatable {
    /// A Firebase Cloud Messaging registration token.
    case fcm(token: String)
    /// An APNs device token (hex), the app's bundle id, and whether it is a development build.
    case apns(token: String, topic: String, sandbox: Bool = false)
    /// A UnifiedPush / Web Push subscription: its endpoint and keys (base64url), as the distributor gives them.
    case webPush(endpoint: String, p256dh: String, auth: String)

    var json: [String: any Sendable] {
        switch self {
        case .fcm(let token): ["provider": "fcm", "token": token]
        case .apns(let token, let topic, let sandbox):
            ["provider": "apns", "token": token, "topic": topic, "environment": sandbox ? "sandbox" : "production"]
        case .webPush(let endpoint, let p256dh, let auth): ["provider": "webpush", "endpoint": endpoint, "p256dh": p256dh, "auth": auth]
        }
    }
}

/// The push providers a daemon sends through, and its VAPID key when Web Push is on.
public struct PushOffer: Decodable, Sendable, Equatable {
    /// `fcm`, `apns`, `webpush`.
    public var providers: [String]
    /// Base64url of the uncompressed P-256 key: the `applicationServerKey` to subscribe with.
    public var vapidPublicKey: String?
}

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

import CountersignWire
import Crypto
import Foundation

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
    /// A request waits for this device, and the push said nothing more (`--sealed-push required`
    /// and a device without a sealing key): read it with ``CountersignDevice/approval(_:)``.
    case approvalWaiting(requestID: String)
    /// Take down the prompt of this request: it was answered (here or elsewhere), cancelled or expired.
    /// Its state (`approved`, `denied`, `expired`, `cancelled`) when the push said.
    case approvalResolved(requestID: String, status: String?)
    /// A new device joined the account: tell the user, who can remove it if it is not theirs.
    /// Its name, platform and time when the push said (a push with no user data says none).
    case deviceAdded(name: String?, platform: String?, at: String?)
    /// Too many wrong codes for the account today: codes are refused until the operator unlocks it or the day ends.
    case codesLocked

    /// The identifier of a prompt's notification for `requestID`: what APNs makes of the prompt's
    /// `apns-collapse-id`, to take it down (`removeDeliveredNotifications(withIdentifiers:)`) when
    /// ``approvalResolved(requestID:status:)`` arrives. (FCM tags an Android prompt with the request's id itself.)
    public static func notificationID(_ requestID: String) -> String { "approval-" + requestID.prefix(40) }

    /// The notice in an APNs notification's `userInfo` (`UNNotificationContent.userInfo`, or the
    /// dictionary `application(_:didReceiveRemoteNotification:)` gets): its top-level string members
    /// beside `aps`. With `sealKey`, a sealed one is opened (``init(sealedPushData:sealKey:)``).
    public init?(userInfo: [AnyHashable: Any], sealKey: P256.KeyAgreement.PrivateKey? = nil, sealedOnly: Bool = false) {
        var data: [String: String] = [:]
        for (key, value) in userInfo {
            if let key = key as? String, let value = value as? String { data[key] = value }
        }
        // A readable prompt's words are its alert's (the data keeps only a relying service's own);
        // a sealed or bare push's alert is the generic one, not the prompt's.
        if data["sealed"] == nil, data["action"] != nil, let alert = (userInfo["aps"] as? [String: Any])?["alert"] as? [String: Any] {
            if data["title"] == nil, let title = alert["title"] as? String { data["title"] = title }
            if data["body"] == nil, let body = alert["body"] as? String { data["body"] = body }
        }
        if let sealKey {
            self.init(sealedPushData: data, sealKey: sealKey, sealedOnly: sealedOnly)
        } else {
            self.init(pushData: data)
        }
    }

    /// The notice in a sealed push's data (FCM's data, or an APNs payload's members): its
    /// `sealed` part opened with the device's sealing key (``DeviceKeyStore/sealingKey()``),
    /// bound to its request. A push that is not sealed is read as ``init(pushData:)`` reads it;
    /// `nil` for one that does not open (not for this key, or altered) or is no notice.
    /// With `sealedOnly` (the daemon runs `--sealed-push required`), a prompt that is not sealed is
    /// refused: whoever could deliver a push cannot put readable words on the prompt screen.
    public init?(sealedPushData data: [String: String], sealKey: P256.KeyAgreement.PrivateKey, sealedOnly: Bool = false) {
        guard let sealed = data["sealed"] else {
            if sealedOnly, data["type"] == "approval_request", data["action"] != nil { return nil }
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

    /// The notice in a Web Push message's payload (a UnifiedPush distributor hands it over
    /// decrypted): a JSON object of the same members as FCM's data; `nil` for anything else.
    public init?(webPushPayload payload: Data) {
        guard payload.count <= 4096, let object = (try? JSONSerialization.jsonObject(with: payload)) as? [String: Any] else { return nil }
        self.init(pushData: object.compactMapValues { $0 as? String })
    }

    /// The notice in a push's data (FCM's `RemoteMessage.data`); `nil` for anything else.
    public init?(pushData data: [String: String]) {
        switch data["type"] {
        case "approval_request":
            guard let id = data["requestId"] else { return nil }
            guard let action = data["action"], let expiresAt = data["expiresAt"] else {
                // Only a push with no user data at all is a bare one; a readable one missing a part is no notice.
                // (FCM adds its own `gcm.`/`google.` members to what an iOS app receives.)
                let own = data.keys.filter { !$0.hasPrefix("gcm.") && !$0.hasPrefix("google.") }
                guard own.allSatisfy({ $0 == "type" || $0 == "requestId" }) else { return nil }
                self = .approvalWaiting(requestID: id)
                return
            }
            let context = data["context"].flatMap { (try? JSONSerialization.jsonObject(with: Data($0.utf8))) as? [String: String] }
            self = .approvalRequest(
                PromptNotice(
                    requestID: id, action: action, expiresAt: expiresAt, title: data["title"], body: data["body"], integration: data["integration"],
                    context: context ?? [:]))
        case "approval_resolved":
            guard let id = data["requestId"] else { return nil }
            self = .approvalResolved(requestID: id, status: data["status"])
        case "device_added":
            self = .deviceAdded(name: data["deviceName"], platform: data["platform"], at: data["at"])
        case "codes_locked":
            self = .codesLocked
        default:
            return nil
        }
    }
}

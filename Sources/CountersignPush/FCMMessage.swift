import CountersignCore
import Foundation

/// The body of an FCM HTTP v1 `messages:send` call: `{"message": {...}}`.
public struct FCMSendBody: Encodable, Sendable, Equatable {
    public var message: FCMMessage
    /// Ask FCM to check the message without delivering it (`countersign fcm check`).
    public var validateOnly: Bool?

    enum CodingKeys: String, CodingKey {
        case message
        case validateOnly = "validate_only"
    }
}

public struct FCMMessage: Encodable, Sendable, Equatable {
    public struct Notification: Encodable, Sendable, Equatable {
        public var title: String
        public var body: String
    }

    public struct Android: Encodable, Sendable, Equatable {
        public struct AndroidNotification: Encodable, Sendable, Equatable {
            public var tag: String
        }
        public var priority: String
        public var ttl: String
        public var collapseKey: String?
        public var notification: AndroidNotification?

        enum CodingKeys: String, CodingKey {
            case priority, ttl, notification
            case collapseKey = "collapse_key"
        }
    }

    public struct APNS: Encodable, Sendable, Equatable {
        public struct Payload: Encodable, Sendable, Equatable {
            public struct APS: Encodable, Sendable, Equatable {
                public var category: String?
                public var mutableContent: Int?
                public var contentAvailable: Int?
                public var interruptionLevel: String?

                enum CodingKeys: String, CodingKey {
                    case category
                    case mutableContent = "mutable-content"
                    case contentAvailable = "content-available"
                    case interruptionLevel = "interruption-level"
                }
            }
            public var aps: APS
        }
        public var headers: [String: String]
        public var payload: Payload
    }

    public var token: String
    public var notification: Notification?
    public var data: [String: String]
    public var android: Android
    public var apns: APNS
}

/// Builds the contract's push messages. Pure: unit-tested, no I/O.
/// No secret and no number code ever goes into a message.
public enum FCMMessageBuilder {
    /// How long a resolution notice may wait for a device.
    public static let resolutionTTL: TimeInterval = 300
    /// FCM's limit on a whole message.
    public static let maximumBytes = 4096

    /// The message for `job` to `token` at `now`; `nil` when a prompt can no longer arrive before its request expires.
    public static func message(for job: PushJob, token: String, now: Date) -> FCMMessage? {
        switch job {
        case .prompt(let requestID, _, let action, let expiresAt, let requester, let prompt):
            let secondsLeft = Int(expiresAt.timeIntervalSince(now).rounded(.down))
            guard secondsLeft >= 1 else { return nil }
            let collapseID = "approval-" + String(requestID.prefix(40))
            var data = [
                "type": "approval_request",
                "requestId": requestID,
                "action": action.rawValue,
                "expiresAt": timestamp(expiresAt),
            ]
            if let prompt {
                // The integration's words: its backend is trusted, and the contract shows them.
                data["title"] = prompt.title
                data["body"] = prompt.body
                data["integration"] = prompt.integrationName
                if let context = contextJSON(prompt.context) { data["context"] = context }
            }
            var message = FCMMessage(
                token: token,
                notification: .init(
                    title: prompt.map { $0.title } ?? title(for: action),
                    body: prompt.map { notificationBody($0) } ?? body(for: action, requester: requester)),
                data: data,
                android: .init(priority: "high", ttl: "\(secondsLeft)s", collapseKey: collapseID, notification: .init(tag: requestID)),
                apns: .init(
                    headers: [
                        "apns-push-type": "alert",
                        "apns-priority": "10",
                        "apns-expiration": String(Int(expiresAt.timeIntervalSince1970.rounded(.down))),
                        "apns-collapse-id": collapseID,
                    ],
                    payload: .init(aps: .init(category: "APPROVAL_REQUEST", mutableContent: 1, interruptionLevel: "time-sensitive"))
                )
            )
            // Within FCM's size limit: the context goes first (the app reads it from the
            // request), then the data copy of the body (the notification carries it).
            for optional in ["context", "body"] where !fits(message) { message.data[optional] = nil }
            return message
        case .resolved(let requestID, _, let status):
            let ttl = Int(resolutionTTL)
            return FCMMessage(
                token: token,
                notification: nil,
                data: ["type": "approval_resolved", "requestId": requestID, "status": status.rawValue],
                android: .init(priority: "high", ttl: "\(ttl)s", collapseKey: nil, notification: nil),
                apns: .init(
                    headers: [
                        "apns-push-type": "background",
                        "apns-priority": "5",
                        "apns-expiration": String(Int(now.timeIntervalSince1970.rounded(.down)) + ttl),
                    ],
                    payload: .init(aps: .init(contentAvailable: 1))
                )
            )
        }
    }

    static func title(for action: ApprovalAction) -> String {
        action == .passwordReset ? "Approve password reset?" : "Approve \(action.rawValue)?"
    }

    /// An integration's body, or its name when the body is empty.
    static func notificationBody(_ prompt: ApprovalPrompt) -> String {
        prompt.body.isEmpty ? "\(prompt.integrationName) asks for your approval. Open to approve or deny." : prompt.body
    }

    /// The context as a JSON object in one data value, when it leaves room in
    /// the message for the rest; the app reads it in full from the request otherwise.
    static func contextJSON(_ context: [String: String]) -> String? {
        guard !context.isEmpty else { return nil }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        guard let data = try? encoder.encode(context), data.count <= maximumContextBytes else { return nil }
        return String(decoding: data, as: UTF8.self)
    }

    static func fits(_ message: FCMMessage) -> Bool {
        ((try? encode(message)) ?? nil) != nil
    }

    /// The most of a message the context may take.
    static let maximumContextBytes = 1200

    /// Names the action and the address it came from. Never the user agent: the
    /// requester writes it, and the system shows this text on the lock screen,
    /// where "Approve to stop the attack" would be an attacker's words. The app
    /// shows the user agent, marked as the requester's, in its own screen.
    static func body(for action: ApprovalAction, requester: RequesterInfo) -> String {
        let what = action == .passwordReset ? "A password reset" : "An approval (\(action.rawValue))"
        return "\(what) was requested from \(requester.ip). Open to approve or deny."
    }

    static func timestamp(_ date: Date) -> String {
        date.formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true, timeZone: .gmt))
    }

    /// The JSON body, or `nil` when it would exceed FCM's size limit.
    public static func encode(_ message: FCMMessage, validateOnly: Bool = false) throws -> Data? {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let data = try encoder.encode(FCMSendBody(message: message, validateOnly: validateOnly ? true : nil))
        return data.count <= maximumBytes ? data : nil
    }
}

extension Unicode.GeneralCategory {
    fileprivate var isControl: Bool { self == .control || self == .format }
}

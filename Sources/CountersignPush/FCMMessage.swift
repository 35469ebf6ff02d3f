import CountersignCore
import Foundation
import NIOCore
import Synchronization

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
                /// Set only on a sealed (or, under `required`, bare) prompt: the generic alert an iOS
                /// app reached through FCM shows until its notification service extension opens it.
                public var alert: [String: String]?
                public var category: String?
                public var mutableContent: Int?
                public var contentAvailable: Int?
                public var interruptionLevel: String?

                enum CodingKeys: String, CodingKey {
                    case alert, category
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
                "expiresAt": Timestamp.string(expiresAt),
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
            for optional in ["context", "body"] where message.data[optional] != nil && !fits(message) { message.data[optional] = nil }
            return message
        case .resolved(let requestID, _, let status):
            return background(token: token, data: ["type": "approval_resolved", "requestId": requestID, "status": status.rawValue], now: now)
        case .deviceAdded(_, _, let deviceName, let platform, let at):
            return background(
                token: token, data: ["type": "device_added", "deviceName": deviceName, "platform": platform, "at": Timestamp.string(at)], now: now)
        case .codesLocked:
            return background(token: token, data: ["type": "codes_locked"], now: now)
        }
    }

    /// A data-only message the app handles quietly.
    static func background(token: String, data: [String: String], now: Date) -> FCMMessage {
        let ttl = Int(resolutionTTL)
        return FCMMessage(
            token: token,
            notification: nil,
            data: data,
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

    /// The JSON body, or `nil` when it would exceed FCM's size limit. Written
    /// field by field (``FCMSendBody/plainJSON``) when no string in it holds a
    /// control character or DEL, by ``encoder`` otherwise: the same bytes either way.
    public static func encode(_ message: FCMMessage, validateOnly: Bool = false) throws -> Data? {
        let body = FCMSendBody(message: message, validateOnly: validateOnly ? true : nil)
        let data = try body.plainJSON.map { Data($0) } ?? encoder.encode(body)
        return data.count <= maximumBytes ? data : nil
    }

    /// The encoder of every message that needs escapes: one, shared (its options never change).
    static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }()
}

extension FCMSendBody {
    /// The bytes ``FCMMessageBuilder/encoder`` writes for this body, written
    /// directly: keys in the encoder's sorted order, `nil` members left out.
    /// `nil` when a string holds a control character or DEL: the encoder
    /// writes those (as `\n` or `\u00XX`). The encoder costs
    /// about a fifth of the daemon's time when it pushes at full speed.
    var plainJSON: [UInt8]? {
        // A sealed prompt's alert is written by the encoder.
        guard message.apns.payload.aps.alert == nil else { return nil }
        var json = PlainJSONWriter()
        json.open()
        json.key("message")
        json.open()
        let android = message.android
        json.key("android")
        json.open()
        if let collapseKey = android.collapseKey { json.member("collapse_key", collapseKey) }
        if let notification = android.notification {
            json.key("notification")
            json.open()
            json.member("tag", notification.tag)
            json.close()
        }
        json.member("priority", android.priority)
        json.member("ttl", android.ttl)
        json.close()
        json.key("apns")
        json.open()
        json.key("headers")
        json.object(message.apns.headers)
        json.key("payload")
        json.open()
        let aps = message.apns.payload.aps
        json.key("aps")
        json.open()
        if let category = aps.category { json.member("category", category) }
        if let contentAvailable = aps.contentAvailable { json.member("content-available", contentAvailable) }
        if let interruptionLevel = aps.interruptionLevel { json.member("interruption-level", interruptionLevel) }
        if let mutableContent = aps.mutableContent { json.member("mutable-content", mutableContent) }
        json.close()
        json.close()
        json.close()
        json.key("data")
        json.object(message.data)
        if let notification = message.notification {
            json.key("notification")
            json.open()
            json.member("body", notification.body)
            json.member("title", notification.title)
            json.close()
        }
        json.member("token", message.token)
        json.close()
        if let validateOnly { json.member("validate_only", validateOnly) }
        json.close()
        return json.plain ? json.bytes : nil
    }
}

/// Compact JSON written in the order it is given, for strings without control characters.
struct PlainJSONWriter {
    private(set) var bytes: [UInt8] = []
    /// False once a string held a control character or DEL: the bytes are then not JSON.
    private(set) var plain = true
    private var needsComma = false

    init() { bytes.reserveCapacity(1024) }

    mutating func open() {
        bytes.append(UInt8(ascii: "{"))
        needsComma = false
    }

    mutating func close() {
        bytes.append(UInt8(ascii: "}"))
        needsComma = true
    }

    mutating func key(_ name: String) {
        if needsComma { bytes.append(UInt8(ascii: ",")) }
        string(name)
        bytes.append(UInt8(ascii: ":"))
        needsComma = false
    }

    mutating func member(_ name: String, _ value: String) {
        key(name)
        string(value)
        needsComma = true
    }

    mutating func member(_ name: String, _ value: Int) {
        key(name)
        bytes.append(contentsOf: String(value).utf8)
        needsComma = true
    }

    mutating func member(_ name: String, _ value: Bool) {
        key(name)
        bytes.append(contentsOf: (value ? "true" : "false").utf8)
        needsComma = true
    }

    /// A string-valued object, its keys sorted.
    mutating func object(_ members: [String: String]) {
        open()
        for (name, value) in members.sorted(by: { $0.key < $1.key }) { member(name, value) }
        close()
    }

    /// A quote and a backslash are escaped with a backslash, as the encoder
    /// does; a control character or DEL ends the plain path.
    private mutating func string(_ text: String) {
        bytes.append(UInt8(ascii: "\""))
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"): bytes.append(UInt8(ascii: "\\"))
            case ..<0x20, 0x7F: plain = false
            default: break
            }
            bytes.append(byte)
        }
        bytes.append(UInt8(ascii: "\""))
    }
}

/// The `messages:send` bodies of one job, one per device: the job's message is written once per job and clock
/// second with its token left out, and each device's body is those bytes with its token put in. They are
/// the bytes ``FCMMessageBuilder/encode(_:validateOnly:)`` writes for the device's message; a body that
/// cannot share them (a string the encoder must escape, a token it would, a message near FCM's size limit)
/// is written whole.
final class FCMJobBodies: Sendable {
    /// One job's message with the token left out, up to the token's opening quote.
    private struct Shared {
        let job: PushJob
        let clock: Int
        /// `nil`: the message has a string the plain writer does not take.
        let prefix: [UInt8]?
    }

    /// The last job written: the dispatcher sends each job's devices one after another.
    private let last = Mutex<Shared?>(nil)

    /// What closes a body after its token: the token's quote, then the message and the body.
    private static let closing: [UInt8] = Array(#""}}"#.utf8)

    /// The body of `job`'s message to `token` at `now`; throws ``PushRefusal`` `tooLate` when a prompt
    /// can no longer arrive, ``FCMFailure`` when the message is too large.
    func body(for job: PushJob, token: String, now: Date) throws -> ByteBuffer {
        let clock = FCMMessageBuilder.clock(of: job, now: now)
        let shared =
            last.withLock { last in last.flatMap { $0.clock == clock && $0.job == job ? $0 : nil } }
            ?? share(job, clock: clock, now: now)
        let token = token.utf8
        guard let prefix = shared?.prefix, prefix.count + token.count + Self.closing.count <= FCMMessageBuilder.maximumBytes,
            token.allSatisfy(Self.isPlain)
        else {
            return try whole(job, token: String(token), now: now)
        }
        var body = ByteBuffer()
        body.reserveCapacity(prefix.count + token.count + Self.closing.count)
        body.writeBytes(prefix)
        body.writeBytes(token)
        body.writeBytes(Self.closing)
        return body
    }

    /// The job's message without a token, remembered as the last job; `nil` when it can no longer be sent.
    private func share(_ job: PushJob, clock: Int, now: Date) -> Shared? {
        guard let message = FCMMessageBuilder.message(for: job, token: "", now: now) else { return nil }
        let prefix = FCMSendBody(message: message, validateOnly: nil).plainJSON.map { Array($0.dropLast(Self.closing.count)) }
        let shared = Shared(job: job, clock: clock, prefix: prefix)
        last.withLock { $0 = shared }
        return shared
    }

    /// The device's message written on its own.
    private func whole(_ job: PushJob, token: String, now: Date) throws -> ByteBuffer {
        guard let message = FCMMessageBuilder.message(for: job, token: token, now: now) else {
            throw PushRefusal(.tooLate, reason: "expired")
        }
        return try FCMMessageBuilder.body(of: message)
    }

    /// A token byte the plain writer writes as it is: no quote, backslash, control character or DEL.
    private static func isPlain(_ byte: UInt8) -> Bool {
        byte >= 0x20 && byte != 0x7F && byte != UInt8(ascii: "\"") && byte != UInt8(ascii: "\\")
    }
}

extension FCMMessageBuilder {
    /// The send body of `message`, to post as it is; throws ``FCMFailure`` when it exceeds FCM's size limit.
    static func body(of message: FCMMessage, validateOnly: Bool = false) throws -> ByteBuffer {
        guard let body = try encode(message, validateOnly: validateOnly) else {
            throw FCMFailure(.invalidArgument, httpStatus: 0, message: "message larger than \(maximumBytes) bytes")
        }
        return ByteBuffer(bytes: body)
    }

    /// What of `now` a message for `job` depends on: a prompt's whole seconds left (its TTL), a notice's
    /// whole second (its APNs expiration).
    static func clock(of job: PushJob, now: Date) -> Int {
        switch job {
        case .prompt(_, _, _, let expiresAt, _, _): Int(expiresAt.timeIntervalSince(now).rounded(.down))
        case .resolved, .deviceAdded, .codesLocked: Int(now.timeIntervalSince1970.rounded(.down))
        }
    }
}

import CountersignCore
import CountersignWire
import Foundation

/// The APNs and Web Push forms of the contract's messages, made from the FCM
/// message (``FCMMessageBuilder``) so that all three say the same. Pure: no I/O.
enum ProviderMessages {
    /// An APNs request's headers (without `authorization`) and JSON body.
    struct APNs: Equatable {
        var headers: [(name: String, value: String)]
        var body: Data

        static func == (lhs: APNs, rhs: APNs) -> Bool {
            lhs.body == rhs.body && lhs.headers.map { "\($0.name):\($0.value)" } == rhs.headers.map { "\($0.name):\($0.value)" }
        }
    }

    /// APNs' limit on a notification's payload.
    static let apnsMaximumBytes = 4096

    /// A device's sealed form (``SealedMessages``): sealed to `key`, or bare (`nil`, under `required`).
    struct Seal {
        var key: SealKey?
    }

    /// The message for `job` to an APNs device of app `topic`; `nil` when a prompt can no longer arrive in time.
    /// With `seal`, the words are sealed (or left out) and a prompt's alert is generic (``SealedMessages/genericAlert``).
    static func apns(for job: PushJob, topic: String, now: Date, seal: Seal? = nil) throws -> APNs? {
        guard let readable = FCMMessageBuilder.message(for: job, token: "", now: now) else { return nil }
        let fcm = try seal.map { try SealedMessages.form(of: readable, key: $0.key) } ?? readable
        var aps = fcm.apns.payload.aps
        aps.alert = fcm.notification.map { ["title": $0.title, "body": $0.body] }
        if seal != nil, readable.notification != nil { aps.alert = SealedMessages.genericAlert }
        guard let body = fitted(fcm.data, within: apnsMaximumBytes, as: { APNsPayload(data: $0, aps: aps) }) else { return nil }
        let headers = fcm.apns.headers
        var out: [(String, String)] = [("apns-topic", topic)]
        // `apns-collapse-id` (a prompt's) collapses an older copy of the same prompt, and is the identifier
        // of the notification the app takes down when the request is resolved: the same as through FCM.
        for name in ["apns-push-type", "apns-priority", "apns-expiration", "apns-collapse-id"] {
            if let value = headers[name] { out.append((name, value)) }
        }
        return APNs(headers: out, body: body)
    }

    /// A Web Push payload before encryption: the FCM data keys and, for a
    /// prompt, the notification's `title` and `body` (the app shows them itself).
    struct WebPush: Equatable {
        var payload: Data
        /// Seconds the push service may hold the message: to the request's expiry, a notice's 5 minutes.
        var ttl: Int
        /// `high` for prompts, `normal` for notices.
        var urgency: String
        /// Collapses an older message of the same request at the push service.
        var topic: String?
    }

    /// The most plaintext one aes128gcm record of 4096 bytes carries (RFC 8291 §4: 4096 − 86 header − 16 tag − 1 delimiter).
    static let webPushMaximumBytes = 3993

    static func webPush(for job: PushJob, now: Date) -> WebPush? {
        guard let fcm = FCMMessageBuilder.message(for: job, token: "", now: now) else { return nil }
        var payload = fcm.data
        if let notification = fcm.notification {
            payload["title"] = notification.title
            payload["body"] = notification.body
        }
        guard let data = fitted(payload, within: webPushMaximumBytes, as: { $0 }) else { return nil }
        let ttl: Int =
            switch job {
            case .prompt(_, _, _, let expiresAt, _, _): max(1, Int(expiresAt.timeIntervalSince(now).rounded(.down)))
            case .resolved, .deviceAdded, .codesLocked: Int(FCMMessageBuilder.resolutionTTL)
            }
        let urgency = if case .prompt = job { "high" } else { "normal" }
        return WebPush(payload: data, ttl: ttl, urgency: urgency, topic: job.requestRef)
    }

    /// The JSON of `body` made from `data` within `limit` bytes: whole, else without the integration's
    /// context (the app reads it from the request, as the FCM builder leaves it out); `nil` when neither fits.
    /// JSONEncoder, not JSONSerialization: the latter sorts keys through ICU's collation, ten times slower.
    private static func fitted<Body: Encodable>(_ data: [String: String], within limit: Int, as body: ([String: String]) -> Body) -> Data? {
        if let whole = try? FCMMessageBuilder.encoder.encode(body(data)), whole.count <= limit { return whole }
        var smaller = data
        smaller["context"] = nil
        return (try? FCMMessageBuilder.encoder.encode(body(smaller))).flatMap { $0.count <= limit ? $0 : nil }
    }
}

/// An APNs body: the FCM message's data keys at the top level, beside `aps`.
private struct APNsPayload: Encodable {
    var data: [String: String]
    var aps: FCMMessage.APNS.Payload.APS

    private struct Key: CodingKey {
        let stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Key.self)
        for (name, value) in data where name != "aps" { try container.encode(value, forKey: Key(stringValue: name)) }
        try container.encode(aps, forKey: Key(stringValue: "aps"))
    }
}

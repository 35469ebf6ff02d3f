import CountersignCore
import CountersignWire
import Foundation

/// What FCM and APNs carry for a device under `--sealed-push`: made from the
/// readable message (``FCMMessageBuilder``), so that the sealed plaintext is the
/// readable payload itself. Pure: no I/O.
///
/// - `off`, or `optional` and a device without a sealing key: the readable message.
/// - A device with a sealing key: `data` is `type`, `requestId` (when the message has
///   one), `sealed` (``PushSeal``: the app's payload, ``appPayload(of:)``) and `v`;
///   no notification, so FCM delivers a data message and the app shows the prompt.
/// - `required` and a device without a sealing key: `type` and `requestId` alone;
///   the app fetches the rest with its API key.
///
/// No number code is in any of them: the readable message has none.
enum SealedMessages {
    /// Whether `device`'s messages leave the readable form under `policy`.
    static func applies(to device: Device, policy: SealedPushPolicy) -> Bool {
        policy != .off && (device.sealKey != nil || policy == .required)
    }

    /// The app's payload of a readable message: its data, and a prompt's notification title and
    /// body (what Web Push carries too, ``ProviderMessages/webPush(for:now:)``).
    static func appPayload(of message: FCMMessage) -> [String: String] {
        var payload = message.data
        if let notification = message.notification {
            payload["title"] = notification.title
            payload["body"] = notification.body
        }
        return payload
    }

    /// `message` as `key` (or, under `required`, no key) makes it. Throws when no sealed
    /// form fits FCM's limit, even without the integration's context.
    static func form(of message: FCMMessage, key: SealKey?) throws -> FCMMessage {
        var routed = ["type": message.data["type"] ?? ""]
        if let requestID = message.data["requestId"] { routed["requestId"] = requestID }
        var sealed = message
        sealed.notification = nil
        sealed.android.notification = nil
        // iOS through FCM: an alert push needs an alert, or iOS shows nothing and the extension never runs.
        if message.notification != nil { sealed.apns.payload.aps.alert = genericAlert }
        sealed.data = routed
        guard let key else { return sealed }
        var payload = appPayload(of: message)
        let aad = message.data["requestId"] ?? ""
        for trimmed in [false, true] {
            // The context goes first, as in the readable message (the app reads it from the request).
            if trimmed { payload["context"] = nil }
            // JSONEncoder, not JSONSerialization: the latter sorts keys through ICU's collation, which was a
            // third of a sealed push's cost (about 100 µs for a prompt's payload, against 10 µs).
            let plaintext = try FCMMessageBuilder.encoder.encode(payload)
            sealed.data = routed.merging(["sealed": try PushSeal.seal(plaintext, to: key, aad: aad), "v": PushSeal.version]) { $1 }
            if FCMMessageBuilder.fits(sealed) { return sealed }
        }
        throw FCMFailure(.invalidArgument, httpStatus: 0, message: "sealed message larger than \(FCMMessageBuilder.maximumBytes) bytes")
    }

    /// The alert APNs shows for a prompt whose words are sealed or left out: generic, localisable by
    /// the app (`loc-key`); its notification service extension replaces it with the real text.
    static let genericAlert: [String: String] = [
        "title": "Approval request", "body": "Open to see it.", "loc-key": "COUNTERSIGN_APPROVAL_REQUEST",
    ]
}

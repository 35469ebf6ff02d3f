import Crypto
import Foundation

/// Signatures as the Standard Webhooks specification has them, so that a
/// receiver verifies with its language's `standardwebhooks` library:
/// `webhook-id` (the event id), `webhook-timestamp` (Unix seconds) and
/// `webhook-signature: v1,<base64 HMAC-SHA256(key, "<id>.<timestamp>.<raw body>")>`,
/// where the key is the base64 after `whsec_` in the secret.
public enum WebhookSignature {
    public static let idHeader = "webhook-id"
    public static let timestampHeader = "webhook-timestamp"
    public static let signatureHeader = "webhook-signature"

    /// The HMAC key of a `whsec_…` secret: its base64 (standard; base64url, as older secrets were
    /// written, is read too) decoded. `nil` for text that is not such a secret.
    public static func key(of secret: String) -> SymmetricKey? {
        guard secret.hasPrefix("whsec_") else { return nil }
        var text = secret.dropFirst(6).replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while text.count % 4 != 0 { text += "=" }
        guard let bytes = Data(base64Encoded: text), !bytes.isEmpty else { return nil }
        return SymmetricKey(data: bytes)
    }

    /// The `webhook-signature` value: one `v1,<base64>` per secret, space-separated.
    public static func header(secrets: [String], id: String, timestamp: Int, body: some DataProtocol) -> String {
        secrets.compactMap(key(of:)).map { "v1," + mac(key: $0, id: id, timestamp: timestamp, body: body).base64EncodedString() }
            .joined(separator: " ")
    }

    static func mac(key: SymmetricKey, id: String, timestamp: Int, body: some DataProtocol) -> Data {
        var message = Data("\(id).\(timestamp).".utf8)
        message.append(contentsOf: body)
        return Data(HMAC<SHA256>.authenticationCode(for: message, using: key))
    }

    /// Checks the three headers as a receiver does: one `v1` signature by
    /// `secret` over the raw body, and a timestamp within `tolerance` of `now`.
    public static func verify(
        id: String, timestamp: String, signature: String, secret: String, body: some DataProtocol, now: Date, tolerance: TimeInterval = 300
    ) -> Bool {
        guard let key = key(of: secret), let seconds = Int(timestamp), abs(now.timeIntervalSince1970 - Double(seconds)) <= tolerance else {
            return false
        }
        var message = Data("\(id).\(seconds).".utf8)
        message.append(contentsOf: body)
        return signature.split(separator: " ").contains { candidate in
            let parts = candidate.split(separator: ",", maxSplits: 1)
            guard parts.count == 2, parts[0] == "v1", let tag = Data(base64Encoded: String(parts[1])) else { return false }
            return HMAC<SHA256>.isValidAuthenticationCode(tag, authenticating: message, using: key)
        }
    }
}

import Crypto
import Foundation

/// The `Countersign-Signature` header: `t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<raw body>")>`,
/// keyed with the whole printed secret (`whsec_` included) as UTF-8 bytes.
public enum WebhookSignature {
    public static let headerName = "Countersign-Signature"

    public static func header(secret: String, body: some DataProtocol, timestamp: Int) -> String {
        "t=\(timestamp),v1=\(mac(secret: secret, body: body, timestamp: timestamp))"
    }

    static func mac(secret: String, body: some DataProtocol, timestamp: Int) -> String {
        var message = Data("\(timestamp).".utf8)
        message.append(contentsOf: body)
        let code = HMAC<SHA256>.authenticationCode(for: message, using: SymmetricKey(data: Data(secret.utf8)))
        return code.map { String(format: "%02x", $0) }.joined()
    }

    /// Checks a header as a receiver does: the MAC over the raw body, and a
    /// timestamp no older (or newer) than `tolerance`.
    public static func verify(header: String, secret: String, body: some DataProtocol, now: Date, tolerance: TimeInterval = 300) -> Bool {
        var timestamp: Int?
        var candidates: [String] = []
        for part in header.split(separator: ",") {
            let pair = part.split(separator: "=", maxSplits: 1).map(String.init)
            guard pair.count == 2 else { continue }
            if pair[0] == "t" { timestamp = Int(pair[1]) }
            if pair[0] == "v1" { candidates.append(pair[1]) }
        }
        guard let timestamp, abs(now.timeIntervalSince1970 - Double(timestamp)) <= tolerance else { return false }
        let expected = Data(mac(secret: secret, body: body, timestamp: timestamp).utf8)
        // Compared as MACs, in constant time.
        let key = SymmetricKey(size: .bits256)
        let expectedTag = HMAC<SHA256>.authenticationCode(for: expected, using: key)
        return candidates.contains { HMAC<SHA256>.isValidAuthenticationCode(expectedTag, authenticating: Data($0.utf8), using: key) }
    }
}

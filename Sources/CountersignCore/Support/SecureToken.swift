import CountersignWire
import Crypto
import Foundation

/// Random identifiers and secrets, and the hash under which secrets are stored.
public enum SecureToken {
    /// `byteCount` bytes from the system CSPRNG, base64url-encoded without padding.
    /// Drawn eight at a time: each draw is a `getrandom` call.
    public static func generate(byteCount: Int) -> String {
        base64URL(randomBytes(byteCount))
    }

    /// `count` bytes from the system CSPRNG, drawn eight at a time.
    public static func randomBytes(_ count: Int) -> [UInt8] {
        var rng = SystemRandomNumberGenerator()
        var bytes: [UInt8] = []
        bytes.reserveCapacity(count + 7)
        while bytes.count < count {
            withUnsafeBytes(of: rng.next() as UInt64) { bytes.append(contentsOf: $0) }
        }
        bytes.removeLast(bytes.count - count)
        return bytes
    }

    /// A request id: 16 random bytes (128 bits), 22 characters.
    public static func requestID() -> String { generate(byteCount: 16) }
    /// A device or user id: 12 random bytes, 16 characters. Never begins with
    /// `-` (drawn again, about one time in 64), so a command line takes it as
    /// an argument, not an option (`countersign device revoke ID`).
    public static func recordID() -> String {
        while true {
            let id = generate(byteCount: 12)
            if !id.hasPrefix("-") { return id }
        }
    }
    /// An API key: 32 random bytes (256 bits), 43 characters.
    public static func apiKey() -> String { generate(byteCount: 32) }

    /// Hex SHA-256, the form in which API keys are stored and looked up.
    public static func sha256Hex(_ text: String) -> String {
        let digest = SHA256.hash(data: Array(text.utf8))
        return String(unsafeUninitializedCapacity: SHA256.byteCount * 2) { buffer in
            var next = 0
            for byte in digest {
                buffer[next] = hexDigits[Int(byte >> 4)]
                buffer[next + 1] = hexDigits[Int(byte & 0x0F)]
                next += 2
            }
            return next
        }
    }

    private static let hexDigits = Array("0123456789abcdef".utf8)

    /// Whether `text` could be a token of ours: base64url characters only, bounded length.
    /// Lets callers refuse junk before it reaches the database or a log.
    public static func isWellFormed(_ text: some StringProtocol, maxLength: Int = 64) -> Bool {
        !text.isEmpty && text.utf8.count <= maxLength
            && text.utf8.allSatisfy { c in
                (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A) || c == 0x2D || c == 0x5F
            }
    }

    /// Base64url without padding (RFC 4648 §5), as tokens and JWK members are written.
    public static func base64URL(_ bytes: some DataProtocol) -> String { Base64URL.encode(bytes) }
}

import Crypto
import Foundation

/// Random identifiers and secrets, and the hash under which secrets are stored.
public enum SecureToken {
    /// `byteCount` bytes from the system CSPRNG, base64url-encoded without padding.
    public static func generate(byteCount: Int) -> String {
        var rng = SystemRandomNumberGenerator()
        let bytes = (0..<byteCount).map { _ in UInt8.random(in: .min ... .max, using: &rng) }
        return base64URL(bytes)
    }

    /// A request id: 16 random bytes (128 bits), 22 characters.
    public static func requestID() -> String { generate(byteCount: 16) }
    /// A device or user id: 12 random bytes, 16 characters.
    public static func recordID() -> String { generate(byteCount: 12) }
    /// An API key: 32 random bytes (256 bits), 43 characters.
    public static func apiKey() -> String { generate(byteCount: 32) }

    /// Hex SHA-256, the form in which API keys are stored and looked up.
    public static func sha256Hex(_ text: String) -> String {
        SHA256.hash(data: Array(text.utf8)).map { byte in
            let hex = String(byte, radix: 16)
            return byte < 16 ? "0" + hex : hex
        }.joined()
    }

    /// Whether `text` could be a token of ours: base64url characters only, bounded length.
    /// Lets callers refuse junk before it reaches the database or a log.
    public static func isWellFormed(_ text: some StringProtocol, maxLength: Int = 64) -> Bool {
        !text.isEmpty && text.utf8.count <= maxLength
            && text.utf8.allSatisfy { c in
                (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A) || c == 0x2D || c == 0x5F
            }
    }

    /// Base64url without padding (RFC 4648 §5), as tokens and JWK members are written.
    public static func base64URL(_ bytes: some DataProtocol) -> String {
        Data(bytes).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}

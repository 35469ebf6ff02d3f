import Crypto
import Foundation

/// The two-digit code that the requesting screen shows and the approving device
/// must send back, against prompt-bombing (number matching).
///
/// Only a salted SHA-256 of the code is stored. Two digits can be brute-forced
/// from the hash by anyone holding the database file; the hash keeps the code
/// out of plain sight (backups, dumps), and the code is worth nothing once the
/// request has left `pending`, at most a minute later.
public enum NumberCode {
    public struct Stored: Sendable, Equatable {
        public var salt: String
        public var hash: String

        public init(salt: String, hash: String) {
            self.salt = salt
            self.hash = hash
        }
    }

    /// A fresh code, 10 to 99, from the system CSPRNG.
    public static func generate() -> String {
        var rng = SystemRandomNumberGenerator()
        return String(Int.random(in: 10...99, using: &rng))
    }

    public static func seal(_ code: String) -> Stored {
        let salt = SecureToken.generate(byteCount: 16)
        return Stored(salt: salt, hash: digest(code, salt: salt))
    }

    public static func matches(_ code: String, _ stored: Stored) -> Bool {
        let candidate = Array(digest(code, salt: stored.salt).utf8)
        let expected = Array(stored.hash.utf8)
        guard candidate.count == expected.count else { return false }
        // constant-time comparison
        var difference: UInt8 = 0
        for (a, b) in zip(candidate, expected) { difference |= a ^ b }
        return difference == 0
    }

    private static func digest(_ code: String, salt: String) -> String {
        SecureToken.sha256Hex(salt + ":" + code)
    }
}

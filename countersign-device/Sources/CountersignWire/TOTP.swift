import Crypto
import Foundation

/// RFC 6238 time-based one-time passwords as authenticator apps make them:
/// HMAC-SHA1 over the number of 30-second steps since the Unix epoch,
/// dynamically truncated (RFC 4226 section 5.3) to 6 digits.
public enum TOTP {
    /// Seconds per step.
    public static let period: TimeInterval = 30
    /// Digits per code.
    public static let digits = 6

    /// The step `date` falls in.
    public static func step(at date: Date) -> Int64 {
        Int64((date.timeIntervalSince1970 / period).rounded(.down))
    }

    /// The code of `step` for `secret`, `digits` long with leading zeros.
    public static func code(secret: some ContiguousBytes, step: Int64, digits: Int = digits) -> String {
        let counter = withUnsafeBytes(of: UInt64(bitPattern: step).bigEndian) { Data($0) }
        let mac = Array(HMAC<Insecure.SHA1>.authenticationCode(for: counter, using: SymmetricKey(data: secret)))
        let offset = Int(mac[mac.count - 1] & 0x0F)
        let binary =
            (UInt32(mac[offset] & 0x7F) << 24) | (UInt32(mac[offset + 1]) << 16) | (UInt32(mac[offset + 2]) << 8) | UInt32(mac[offset + 3])
        var modulus: UInt32 = 1
        for _ in 0..<digits { modulus *= 10 }
        let number = String(binary % modulus)
        return String(repeating: "0", count: max(0, digits - number.count)) + number
    }

    /// Whether two codes of equal length are equal, looking at every byte
    /// whatever the first difference: how long it takes tells nothing of
    /// how close a guess was.
    public static func sameCode(_ lhs: String, _ rhs: String) -> Bool {
        let left = Array(lhs.utf8)
        let right = Array(rhs.utf8)
        guard left.count == right.count else { return false }
        var difference: UInt8 = 0
        for index in left.indices { difference |= left[index] ^ right[index] }
        return difference == 0
    }
}

/// RFC 4648 base32 (A–Z, 2–7), the alphabet `otpauth://` secrets are written in.
public enum Base32 {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567".utf8)

    /// Without padding, as authenticator apps read it.
    public static func encode(_ bytes: some Sequence<UInt8>) -> String {
        var output: [UInt8] = []
        var buffer: UInt32 = 0
        var bits = 0
        for byte in bytes {
            buffer = (buffer << 8) | UInt32(byte)
            bits += 8
            while bits >= 5 {
                output.append(alphabet[Int((buffer >> UInt32(bits - 5)) & 0x1F)])
                bits -= 5
            }
        }
        if bits > 0 { output.append(alphabet[Int((buffer << UInt32(5 - bits)) & 0x1F)]) }
        return String(decoding: output, as: UTF8.self)
    }

    /// Upper or lower case, padding and spaces ignored; `nil` for any other character.
    public static func decode(_ text: String) -> [UInt8]? {
        var output: [UInt8] = []
        var buffer: UInt32 = 0
        var bits = 0
        for character in text.uppercased().utf8 where character != UInt8(ascii: "=") && character != UInt8(ascii: " ") {
            guard let value = alphabet.firstIndex(of: character) else { return nil }
            buffer = (buffer << 5) | UInt32(value)
            bits += 5
            if bits >= 8 {
                output.append(UInt8((buffer >> UInt32(bits - 8)) & 0xFF))
                bits -= 8
            }
        }
        return output
    }
}

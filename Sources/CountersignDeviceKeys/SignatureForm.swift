import CountersignCore
import Foundation

/// One signature, one text: a JWS whose segments are not canonical base64url
/// (non-zero padding bits), or whose ECDSA `s` is in the upper half of the
/// P-256 order, is refused. Otherwise `s` and `n − s` (or two spellings of the
/// last character) would be two texts of one valid signature, and a guard that
/// remembers texts would take the second for new.
enum SignatureForm {
    /// Half the order of P-256, big-endian: `s` above it is "high".
    static let halfOrder: [UInt8] = [
        0x7F, 0xFF, 0xFF, 0xFF, 0x80, 0x00, 0x00, 0x00, 0x7F, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
        0xDE, 0x73, 0x7D, 0x56, 0xD3, 0x8B, 0xCF, 0x42, 0x79, 0xDC, 0xE5, 0x61, 0x7E, 0x31, 0x92, 0xA8,
    ]

    /// Whether `jws` has three canonical base64url segments and a 64-byte ES256 signature with a low `s`.
    static func isCanonical(_ jws: String) -> Bool {
        let segments = jws.split(separator: ".", omittingEmptySubsequences: false)
        guard segments.count == 3 else { return false }
        var decoded: [Data] = []
        for segment in segments {
            guard let bytes = DeviceKey.decode(String(segment)), SecureToken.base64URL(bytes) == segment else { return false }
            decoded.append(bytes)
        }
        guard decoded[2].count == 64 else { return false }
        return hasLowS(Array(decoded[2].suffix(32)))
    }

    /// `s ≤ n/2`, compared as big-endian numbers.
    static func hasLowS(_ s: [UInt8]) -> Bool {
        for (byte, limit) in zip(s, halfOrder) where byte != limit { return byte < limit }
        return true
    }
}

import Crypto
import Foundation

/// RFC 4648 §5 base64url without padding: how keys, sealed pushes and signatures travel.
public enum Base64URL {
    /// `bytes` as base64url, no padding.
    public static func encode(_ bytes: some DataProtocol) -> String {
        let standard = Data(bytes).base64EncodedData()
        return String(unsafeUninitializedCapacity: standard.count) { buffer in
            var count = 0
            for character in standard {
                switch character {
                case UInt8(ascii: "+"): buffer[count] = UInt8(ascii: "-")
                case UInt8(ascii: "/"): buffer[count] = UInt8(ascii: "_")
                case UInt8(ascii: "="): continue
                default: buffer[count] = character
                }
                count += 1
            }
            return count
        }
    }

    /// The bytes of base64url `text` (no padding, nothing but the alphabet); `nil` otherwise or when empty.
    public static func decode(_ text: String) -> Data? {
        guard !text.isEmpty, text.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") }) else { return nil }
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while base64.count % 4 != 0 { base64 += "=" }
        return Data(base64Encoded: base64)
    }
}

/// The RFC 7638 thumbprint of a P-256 key as a JWK: SHA-256 of its required
/// members in lexicographic order, no white space, base64url. What listings and logs show of a key.
public enum JWKThumbprint {
    /// The JWK of the point `x`, `y` (base64url coordinates) as RFC 7638 orders it.
    public static func json(x: String, y: String) -> String { #"{"crv":"P-256","kty":"EC","x":"\#(x)","y":"\#(y)"}"# }

    /// The thumbprint of the P-256 point with base64url coordinates `x`, `y`.
    public static func p256(x: String, y: String) -> String {
        Base64URL.encode(Data(SHA256.hash(data: Data(json(x: x, y: y).utf8))))
    }
}

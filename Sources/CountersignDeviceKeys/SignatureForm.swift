import CountersignCore
import Foundation

/// The form a JWS must have before its signature is checked: three segments
/// of canonical base64url (no padding bits set) and a 64-byte ES256
/// signature. An ECDSA signature is accepted with its `s` in either half of
/// the order: phones' keystores and standard JOSE libraries do not normalise
/// `s`, so about half of their honest signatures have a high one. That `s`
/// and `n − s` are two texts of one signature does not matter: an answer is
/// taken once by its request's state, and a proof once by its meaning
/// (``ProofUse``), never by its text.
enum SignatureForm {
    /// Whether `jws` has three canonical base64url segments and a 64-byte ES256 signature.
    static func isCanonical(_ jws: String) -> Bool {
        let segments = jws.split(separator: ".", omittingEmptySubsequences: false)
        guard segments.count == 3 else { return false }
        var signatureBytes = 0
        for segment in segments {
            guard let bytes = DeviceKey.decode(String(segment)), SecureToken.base64URL(bytes) == segment else { return false }
            signatureBytes = bytes.count
        }
        return signatureBytes == 64
    }
}

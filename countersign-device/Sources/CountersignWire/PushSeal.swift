import Crypto
import Foundation

/// A device's sealing key: the P-256 public key its pushes are sealed to (HPKE),
/// registered beside its push address as `"sealKey"`, base64url of the 65-byte
/// uncompressed point. Not the device's signing key (one key, one use).
public struct SealKey: Sendable, Equatable {
    /// The uncompressed point, 65 bytes starting 0x04; on the curve (checked on the way in).
    public let point: Data

    public enum Invalid: Error, Equatable {
        /// Not base64url of 65 bytes.
        case malformed
        /// Not a point on P-256.
        case notOnCurve
    }

    /// From its base64url text (no padding; at most 100 characters).
    public init(base64URL text: String) throws(Invalid) {
        guard text.count <= 100, let point = Base64URL.decode(text), point.count == 65, point.first == 0x04 else { throw .malformed }
        guard (try? P256.KeyAgreement.PublicKey(x963Representation: point)) != nil else { throw .notOnCurve }
        self.point = point
    }

    public init(publicKey: P256.KeyAgreement.PublicKey) {
        point = publicKey.x963Representation
    }

    /// As sent and stored: base64url, no padding.
    public var text: String { Base64URL.encode(point) }

    /// The RFC 7638 thumbprint of the key as a P-256 JWK: what the device's listing shows.
    public var thumbprint: String {
        JWKThumbprint.p256(x: Base64URL.encode(point.dropFirst().prefix(32)), y: Base64URL.encode(point.suffix(32)))
    }

    /// The key itself.
    public var publicKey: P256.KeyAgreement.PublicKey {
        // swift-format-ignore: NeverUseForceTry
        try! P256.KeyAgreement.PublicKey(x963Representation: point)
    }
}

/// A push sealed end to end to a device's ``SealKey``: HPKE (RFC 9180) base mode,
/// DHKEM(P-256, HKDF-SHA256), HKDF-SHA256, AES-128-GCM, by swift-crypto. A fresh
/// encapsulation per message; `info` names the protocol, `aad` the request.
public enum PushSeal {
    public static let ciphersuite = HPKE.Ciphersuite(kem: .P256_HKDF_SHA256, kdf: .HKDF_SHA256, aead: .AES_GCM_128)
    public static let info = Data("countersign push v1".utf8)
    /// The version of the sealed form, sent as `"v"`.
    public static let version = "1"
    /// The size of the encapsulated key at the front of a sealed message (an uncompressed P-256 point).
    public static let encapsulatedKeyBytes = 65

    /// base64url(enc || ciphertext) of `plaintext` for `key`, bound to `aad` (the request's id, or "" for a notice).
    public static func seal(_ plaintext: Data, to key: SealKey, aad: String) throws -> String {
        var sender = try HPKE.Sender(recipientKey: key.publicKey, ciphersuite: ciphersuite, info: info)
        let ciphertext = try sender.seal(plaintext, authenticating: Data(aad.utf8))
        return Base64URL.encode(sender.encapsulatedKey + ciphertext)
    }

    public enum OpenError: Error, Equatable {
        /// Not base64url, or too short to hold a key and a tag.
        case malformed
        /// Not sealed to this key, for this `aad`, or altered.
        case notOpened
    }

    /// What ``seal(_:to:aad:)`` sealed, opened with the device's private sealing key.
    public static func open(_ sealed: String, with key: P256.KeyAgreement.PrivateKey, aad: String) throws(OpenError) -> Data {
        guard let bytes = Base64URL.decode(sealed), bytes.count > encapsulatedKeyBytes + 16 else { throw .malformed }
        do {
            var recipient = try HPKE.Recipient(
                privateKey: key, ciphersuite: ciphersuite, info: info, encapsulatedKey: bytes.prefix(encapsulatedKeyBytes))
            return try recipient.open(bytes.dropFirst(encapsulatedKeyBytes), authenticating: Data(aad.utf8))
        } catch {
            throw .notOpened
        }
    }
}

import Crypto
import Foundation

/// Message encryption for Web Push (RFC 8291) in the `aes128gcm` content
/// coding (RFC 8188), one record: P-256 key agreement with the subscription's
/// key, HKDF-SHA-256 with its auth secret, AES-128-GCM — all swift-crypto's.
enum WebPushEncryption {
    /// The record size written in the header: one record holds the whole message.
    static let recordSize: UInt32 = 4096

    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    /// The encrypted body for a subscription (`p256dh` 65 bytes, `auth` 16),
    /// with a fresh key pair and salt unless given (the RFC's example gives them).
    static func encrypt(
        _ plaintext: Data, p256dh: Data, auth: Data, senderKey: P256.KeyAgreement.PrivateKey = P256.KeyAgreement.PrivateKey(),
        salt: Data? = nil
    ) throws -> Data {
        guard auth.count == 16 else { throw Failure(description: "auth secret is not 16 bytes") }
        let receiverKey: P256.KeyAgreement.PublicKey
        do {
            receiverKey = try P256.KeyAgreement.PublicKey(x963Representation: p256dh)
        } catch {
            throw Failure(description: "p256dh is not a P-256 public key")
        }
        let salt = salt ?? Data((0..<16).map { _ in UInt8.random(in: 0...255) })
        guard salt.count == 16 else { throw Failure(description: "salt is not 16 bytes") }
        guard plaintext.count + 1 + 16 + 86 <= Int(recordSize) else { throw Failure(description: "message too large for one record") }
        let senderPublic = senderKey.publicKey.x963Representation
        let shared = try senderKey.sharedSecretFromKeyAgreement(with: receiverKey)
        // RFC 8291 §3.4: IKM = HKDF(auth, ecdh_secret, "WebPush: info" || 0x00 || ua_public || as_public, 32).
        var keyInfo = Data("WebPush: info".utf8)
        keyInfo.append(0)
        keyInfo.append(p256dh)
        keyInfo.append(senderPublic)
        let ikm = shared.hkdfDerivedSymmetricKey(using: SHA256.self, salt: auth, sharedInfo: keyInfo, outputByteCount: 32)
        // RFC 8188 §2.2 and §2.3: the content key and nonce from the salt.
        let contentKey = HKDF<SHA256>.deriveKey(
            inputKeyMaterial: ikm, salt: salt, info: Data("Content-Encoding: aes128gcm\u{0}".utf8), outputByteCount: 16)
        let nonce = HKDF<SHA256>.deriveKey(inputKeyMaterial: ikm, salt: salt, info: Data("Content-Encoding: nonce\u{0}".utf8), outputByteCount: 12)
        // The last (and only) record: the plaintext and the 0x02 delimiter, no padding.
        var record = plaintext
        record.append(2)
        let sealed = try AES.GCM.seal(record, using: contentKey, nonce: AES.GCM.Nonce(data: nonce.withUnsafeBytes { Data($0) }))
        var body = salt
        withUnsafeBytes(of: recordSize.bigEndian) { body.append(contentsOf: $0) }
        body.append(UInt8(senderPublic.count))
        body.append(senderPublic)
        body.append(sealed.ciphertext)
        body.append(sealed.tag)
        return body
    }
}

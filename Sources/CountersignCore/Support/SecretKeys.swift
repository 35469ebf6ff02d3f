import Crypto
import Foundation

/// The daemon's own secret, kept outside the database (a key file or a
/// systemd credential), and the keys derived from it: one keys the hashes of
/// reset codes and link tokens, so a copy of the database alone cannot test
/// the million possible codes; the other seals what the outbox must keep until
/// it is sent (a mail carries a code), so the database never holds it in clear;
/// a third seals the devices' offline-code secrets.
public struct SecretKeys: Sendable, CustomStringConvertible {
    private let hashKey: SymmetricKey
    private let sealKey: SymmetricKey
    private let deviceSecretKey: SymmetricKey

    public var description: String { "SecretKeys(redacted)" }

    /// The length of the master secret, in bytes.
    public static let byteCount = 32

    public init(master: SymmetricKey) {
        hashKey = HKDF<SHA256>.deriveKey(inputKeyMaterial: master, info: Data("countersign secret hash v1".utf8), outputByteCount: 32)
        sealKey = HKDF<SHA256>.deriveKey(inputKeyMaterial: master, info: Data("countersign outbox seal v1".utf8), outputByteCount: 32)
        deviceSecretKey = HKDF<SHA256>.deriveKey(
            inputKeyMaterial: master, info: Data("countersign device secret seal v1".utf8), outputByteCount: 32)
    }

    /// A fresh random secret (tests, and a first start without a key file).
    public static func random() -> SecretKeys { SecretKeys(master: SymmetricKey(size: .bits256)) }

    /// HMAC-SHA256 of `secret` bound to `context` (a ticket id, or a purpose), hex-encoded.
    public func hash(_ secret: String, context: String) -> String {
        let mac = HMAC<SHA256>.authenticationCode(for: Self.message(secret, context), using: hashKey)
        return Data(mac).map { String(format: "%02x", $0) }.joined()
    }

    /// What the audit trail names an erased user by, instead of their email: `erased-` and 24 hex
    /// digits of a keyed hash of the (normalised) email. The same for the same email under the same
    /// secret, so the operator, holding both, still finds the events (`countersign audit --email`);
    /// a copy of the database alone cannot test guesses against it.
    public func auditPseudonym(email: String) -> String {
        "erased-" + hash(User.normalize(email: email), context: "audit pseudonym").prefix(24)
    }

    /// Whether `stored` is ``hash(_:context:)`` of `secret`, compared in constant time.
    public func matches(_ secret: String, context: String, stored: String) -> Bool {
        guard let code = Self.bytes(hex: stored) else { return false }
        return HMAC<SHA256>.isValidAuthenticationCode(code, authenticating: Self.message(secret, context), using: hashKey)
    }

    /// AES-GCM: nonce, ciphertext and tag in one blob.
    public func seal(_ plaintext: Data) throws -> Data {
        guard let combined = try AES.GCM.seal(plaintext, using: sealKey).combined else { throw SealError() }
        return combined
    }

    /// Opens what ``seal(_:)`` sealed with the same secret; throws for anything else.
    public func open(_ sealed: Data) throws -> Data {
        try AES.GCM.open(AES.GCM.SealedBox(combined: sealed), using: sealKey)
    }

    /// Seals a device's offline-code secret (AES-GCM under a key of its own).
    public func sealDeviceSecret(_ secret: some ContiguousBytes) throws -> Data {
        let plaintext = secret.withUnsafeBytes { Data($0) }
        guard let combined = try AES.GCM.seal(plaintext, using: deviceSecretKey).combined else { throw SealError() }
        return combined
    }

    /// Opens what ``sealDeviceSecret(_:)`` sealed with the same secret; throws for anything else.
    public func openDeviceSecret(_ sealed: Data) throws -> Data {
        try AES.GCM.open(AES.GCM.SealedBox(combined: sealed), using: deviceSecretKey)
    }

    public struct SealError: Error {}

    private static func message(_ secret: String, _ context: String) -> Data {
        // The length prefix keeps ("ab", "c") and ("a", "bc") apart.
        Data("\(context.utf8.count):\(context):\(secret)".utf8)
    }

    private static func bytes(hex: String) -> Data? {
        let digits = Array(hex.utf8)
        guard digits.count % 2 == 0 else { return nil }
        var bytes = Data(capacity: digits.count / 2)
        for index in stride(from: 0, to: digits.count, by: 2) {
            guard let byte = UInt8(String(decoding: digits[index..<index + 2], as: UTF8.self), radix: 16) else { return nil }
            bytes.append(byte)
        }
        return bytes
    }
}

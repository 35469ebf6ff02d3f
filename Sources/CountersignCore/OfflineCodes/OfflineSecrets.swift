import CountersignWire
import Foundation

/// Hands out the offline-code secret of a device (at login, enrollment and
/// key refresh): 160 random bits, shown to the device once in base32 with
/// its `otpauth://` URI, and kept only sealed with the daemon's secret key.
public struct OfflineSecrets: Sendable {
    public let keys: SecretKeys
    /// `--offline-codes`: off, no secret is issued or accepted.
    public let enabled: Bool
    /// The issuer in the `otpauth://` URI (`--otp-issuer`).
    public let issuer: String

    public init(keys: SecretKeys, enabled: Bool, issuer: String = AppIdentity().otpIssuer) {
        self.keys = keys
        self.enabled = enabled
        self.issuer = issuer
    }

    /// A new secret, as the device gets it and as it is stored.
    public struct Issued: Sendable {
        /// Base32, for the device's keychain; never stored or logged.
        public let secret: String
        /// What the database keeps.
        public let sealed: Data
        /// The issuer the URI names.
        public let issuer: String

        /// The `otpauth://` URI an authenticator app reads, for `email`.
        public func uri(email: String) -> String {
            let issuer = OfflineSecrets.percentEncoded(issuer)
            let label = issuer + ":" + OfflineSecrets.percentEncoded(email)
            return "otpauth://totp/\(label)?secret=\(secret)&issuer=\(issuer)&algorithm=SHA1&digits=\(TOTP.digits)&period=\(Int(TOTP.period))"
        }
    }

    /// A new secret; `nil` when offline codes are off.
    public func issue() throws -> Issued? {
        guard enabled else { return nil }
        let bytes = SecureToken.randomBytes(20)
        return Issued(secret: Base32.encode(bytes), sealed: try keys.sealDeviceSecret(bytes), issuer: issuer)
    }

    /// The secret a device holds, from its sealed form; `nil` when it cannot be opened (another secret key).
    func open(_ sealed: Data) -> Data? {
        try? keys.openDeviceSecret(sealed)
    }

    private static let unreserved = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~@".utf8)

    static func percentEncoded(_ text: String) -> String {
        var output = ""
        for byte in text.utf8 {
            if unreserved.contains(byte) {
                output.unicodeScalars.append(Unicode.Scalar(byte))
            } else {
                output += String(format: "%%%02X", byte)
            }
        }
        return output
    }
}

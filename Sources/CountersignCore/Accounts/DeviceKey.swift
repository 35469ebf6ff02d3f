import CountersignWire
import Crypto
import Foundation

/// A device's P-256 public key (the curve of the Secure Enclave and
/// StrongBox), as the JWK `{"kty": "EC", "crv": "P-256", "x": …, "y": …}` it
/// arrives in. Only a point on the curve is accepted.
public struct DeviceKey: Sendable, Equatable {
    /// Base64url (no padding) of the 32-byte coordinates.
    public let x: String
    public let y: String

    public enum Invalid: Error, Equatable {
        /// Not an EC P-256 JWK with two 32-byte base64url coordinates.
        case malformed
        /// The coordinates are not a point on P-256.
        case notOnCurve
    }

    public init(x: String, y: String) throws(Invalid) {
        guard let xBytes = Self.decode(x), let yBytes = Self.decode(y), xBytes.count == 32, yBytes.count == 32 else {
            throw .malformed
        }
        do {
            _ = try P256.Signing.PublicKey(x963Representation: [0x04] + xBytes + yBytes)
        } catch {
            throw .notOnCurve
        }
        // Canonical form: the same point always has the same text (and thumbprint).
        self.x = SecureToken.base64URL(xBytes)
        self.y = SecureToken.base64URL(yBytes)
    }

    /// A JWK object as decoded from JSON; anything but `kty: EC`, `crv: P-256` is refused.
    public init(jwk: [String: String]) throws(Invalid) {
        guard jwk["kty"] == "EC", jwk["crv"] == "P-256", let x = jwk["x"], let y = jwk["y"], jwk["d"] == nil else { throw .malformed }
        try self.init(x: x, y: y)
    }

    public init(publicKey: P256.Signing.PublicKey) {
        let point = publicKey.x963Representation.dropFirst()
        x = SecureToken.base64URL(Data(point.prefix(32)))
        y = SecureToken.base64URL(Data(point.suffix(32)))
    }

    public var publicKey: P256.Signing.PublicKey {
        // Checked on the way in.
        // swift-format-ignore: NeverUseForceTry
        try! P256.Signing.PublicKey(x963Representation: [0x04] + Self.decode(x)! + Self.decode(y)!)
    }

    /// The JWK members, as sent and stored.
    public var jwk: [String: String] { ["kty": "EC", "crv": "P-256", "x": x, "y": y] }

    /// The JWK as stored: its members in the RFC 7638 order.
    public var json: String { JWKThumbprint.json(x: x, y: y) }

    /// RFC 7638 JWK thumbprint: SHA-256 of the required members in
    /// lexicographic order, no white space, base64url. What logs and listings show.
    public var thumbprint: String { JWKThumbprint.p256(x: x, y: y) }

    /// Reads what ``json`` wrote.
    public init(stored: String) throws(Invalid) {
        guard let data = stored.data(using: .utf8), let object = try? JSONSerialization.jsonObject(with: data) as? [String: String] else {
            throw .malformed
        }
        try self.init(jwk: object)
    }

    public static func decode(_ text: String) -> Data? { Base64URL.decode(text) }
}

/// A proof of possession by what it means, not by its text: the device, the
/// key it proves (RFC 7638 thumbprint) and its `iat`. Each is used once.
public struct ProofUse: Sendable, Hashable {
    public var deviceID: String
    public var thumbprint: String
    public var issuedAt: Int

    public init(deviceID: String, thumbprint: String, issuedAt: Int) {
        self.deviceID = deviceID
        self.thumbprint = thumbprint
        self.issuedAt = issuedAt
    }
}

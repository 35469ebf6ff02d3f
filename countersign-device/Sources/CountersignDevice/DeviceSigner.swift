import CountersignWire
import Crypto
import Foundation

/// What signs for the device: its answers and its proofs of possession
/// (ECDSA P-256 over SHA-256, ES256). The library asks for signatures and
/// never for the private key, so the key may live where the platform keeps
/// it best: the Secure Enclave on iOS (`SecureEnclave.P256.Signing.PrivateKey`
/// has exactly these two members), an Android-Keystore–style service, a token.
public protocol DeviceSigner: Sendable {
    /// The public half, registered with the daemon at sign-in and enrollment.
    func publicKey() async throws -> P256.Signing.PublicKey
    /// A signature over `message` (hashed with SHA-256 by the signer). Its `s` may be
    /// in either half of the order: the daemon takes both, as platforms' keystores make both.
    func signature(for message: Data) async throws -> P256.Signing.ECDSASignature
}

/// A ``DeviceSigner`` whose key is in this process's memory: for a test device,
/// a command-line tool (``FileKeyStore``), or a platform without a key store.
public struct SoftwareSigner: DeviceSigner {
    private let key: P256.Signing.PrivateKey

    /// Signs with `key`.
    public init(key: P256.Signing.PrivateKey) {
        self.key = key
    }

    public func publicKey() async throws -> P256.Signing.PublicKey { key.publicKey }

    public func signature(for message: Data) async throws -> P256.Signing.ECDSASignature {
        try key.signature(for: message)
    }
}

/// The compact JWS (RFC 7515 §7.1) of a device's answer or proof, made through a
/// ``DeviceSigner``: `base64url(header) "." base64url(payload) "." base64url(r || s)`.
/// JWS libraries sign only with a key they hold, so the three parts are joined
/// here; the daemon verifies them with jwt-kit, and the tests with PyJWT.
enum CompactJWS {
    /// `payload` signed by `signer`, with `{"alg": "ES256", "typ": type}` as its header.
    static func sign(_ payload: some Encodable, type: String, with signer: any DeviceSigner) async throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let header = try encoder.encode(["alg": "ES256", "typ": type])
        let input = Base64URL.encode(header) + "." + Base64URL.encode(try encoder.encode(payload))
        let signature = try await signer.signature(for: Data(input.utf8))
        return input + "." + Base64URL.encode(signature.rawRepresentation)
    }

    /// What a device signs when it answers (`typ` `countersign-answer+jwt`).
    struct Answer: Encodable {
        var requestId: String
        var decision: String
        var numberCode: String?
        var iat: Int
        var deviceId: String
        var fraud: Bool?
    }

    /// What a device signs to prove it holds a key (`typ` `JWT`).
    struct Proof: Encodable {
        var deviceId: String
        var iat: Int
    }
}

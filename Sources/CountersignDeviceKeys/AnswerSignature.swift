import CountersignCore
import Foundation
import JWTKit

/// The signed answer of a key-bound device: a compact JWS, header
/// `{"alg": "ES256", "typ": "countersign-answer+jwt"}`, over what the device
/// answered. Verified with jwt-kit against the device's stored key only.
public enum AnswerSignature {
    public static let type = "countersign-answer+jwt"
    /// How far `iat` may be from the server's clock, either way.
    public static let maxSkew: TimeInterval = 120

    /// What the device signs.
    public struct Payload: JWTPayload, Equatable {
        public var requestId: String
        public var decision: String
        public var numberCode: String?
        public var iat: Int
        public var deviceId: String
        /// `true` when the answer reports fraud; absent otherwise.
        public var fraud: Bool?

        public init(requestId: String, decision: String, numberCode: String?, iat: Int, deviceId: String, fraud: Bool? = nil) {
            self.requestId = requestId
            self.decision = decision
            self.numberCode = numberCode
            self.iat = iat
            self.deviceId = deviceId
            self.fraud = fraud
        }

        // The claims are checked against the answer by ``verify(_:key:expected:now:)``.
        public func verify(using algorithm: some JWTAlgorithm) throws {}
    }

    /// Signs an answer (the reference device, `countersign device simulate`).
    public static func sign(_ payload: Payload, with key: ES256PrivateKey) async throws -> String {
        try await signing(with: key) { try await $0.sign(payload, header: ["typ": .string(type)]) }
    }

    /// One signature by `key`, as it comes: its `s` may be high or low, as a
    /// phone's keystore would make it.
    static func signing(with key: ES256PrivateKey, _ sign: (JWTKeyCollection) async throws -> String) async throws -> String {
        let keys = JWTKeyCollection()
        await keys.add(ecdsa: key)
        return try await sign(keys)
    }

    /// Checks `jws` strictly: canonical base64url (``SignatureForm``), `s` high or low, ES256 only (the header must say so; `none`, HMAC
    /// and a key in the header are refused), signed by `key`, every claim equal
    /// to `expected` (but `iat`), and `iat` within ``maxSkew`` of `now`.
    public static func verify(_ jws: String, key: DeviceKey, expected: Payload, now: Date) async -> Bool {
        guard let payload = await verifiedPayload(jws, key: key, as: Payload.self) else { return false }
        var claims = payload
        claims.iat = expected.iat
        // `"fraud": false` says what absence says.
        if claims.fraud == false { claims.fraud = nil }
        return claims == expected && abs(TimeInterval(payload.iat) - now.timeIntervalSince1970) <= maxSkew
    }

    /// The payload of `jws` if it is ES256, of the expected `typ` (`nil`: any
    /// but an answer's), and signed by `key`. The header may name nothing else
    /// that picks or widens the check: no key or key URL, no `crit` extension.
    static func verifiedPayload<P: JWTPayload>(_ jws: String, key: DeviceKey, as: P.Type, type: String? = AnswerSignature.type) async -> P? {
        guard jws.utf8.count <= 4096, SignatureForm.isCanonical(jws), let header = try? DefaultJWTParser().parse(Array(jws.utf8), as: P.self).header,
            header.alg == "ES256", type.map({ header.typ == $0 }) ?? (header.typ != AnswerSignature.type),
            header.jwk == nil, header.x5c == nil, header.jku == nil, header.x5u == nil, header.crit == nil
        else { return nil }
        do {
            let keys = JWTKeyCollection()
            await keys.add(ecdsa: try ES256PublicKey(parameters: (x: key.x, y: key.y)))
            return try await keys.verify(jws, as: P.self)
        } catch {
            return nil
        }
    }
}

extension AnswerSignature {
    /// The claims of `jws` if its signature is `key`'s (ES256), whatever its
    /// age: what the audit trail re-checks long after the answer.
    public static func signedClaims(_ jws: String, key: DeviceKey) async -> Payload? {
        await verifiedPayload(jws, key: key, as: Payload.self)
    }
}

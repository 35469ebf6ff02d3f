import CountersignCore
import Foundation
import JWTKit

/// Proof that a device holds a key: a JWS (ES256) made with that key over
/// `{"deviceId": "…", "iat": …}`, `iat` within 5 minutes of the server clock.
public enum PossessionProof {
    public static let maxSkew: TimeInterval = 300

    public struct Payload: JWTPayload, Equatable {
        public var deviceId: String
        public var iat: Int

        public init(deviceId: String, iat: Int) {
            self.deviceId = deviceId
            self.iat = iat
        }

        public func verify(using algorithm: some JWTAlgorithm) throws {}
    }

    public static func sign(deviceID: String, at date: Date, with key: ES256PrivateKey) async throws -> String {
        try await AnswerSignature.signing(with: key) { try await $0.sign(Payload(deviceId: deviceID, iat: Int(date.timeIntervalSince1970))) }
    }

    /// Whether `jws` is ES256, signed by `key`, for `deviceID`, and fresh. A
    /// signed answer is not a proof (its `typ` and its claims say what it is):
    /// otherwise one captured answer could stand in as `previousProof`.
    public static func verify(_ jws: String, key: DeviceKey, deviceID: String, now: Date) async -> Bool {
        await verifiedUse(jws, key: key, deviceID: deviceID, now: now) != nil
    }

    /// What makes a proof the same proof whatever its text: the device, the key
    /// and `iat`, if `jws` is a valid proof (see ``verify(_:key:deviceID:now:)``).
    public static func verifiedUse(_ jws: String, key: DeviceKey, deviceID: String, now: Date) async -> ProofUse? {
        guard let payload = await AnswerSignature.verifiedPayload(jws, key: key, as: Payload.self, type: nil),
            (try? DefaultJWTParser().parse(Array(jws.utf8), as: AnswerSignature.Payload.self)) == nil,
            payload.deviceId == deviceID, abs(TimeInterval(payload.iat) - now.timeIntervalSince1970) <= maxSkew
        else { return nil }
        return ProofUse(deviceID: deviceID, thumbprint: key.thumbprint, issuedAt: payload.iat)
    }
}

extension DeviceKey {
    /// The public half of a signing key (the reference device's own).
    public init(signingKey: ES256PrivateKey) throws {
        guard let parameters = signingKey.publicKey.parameters else { throw DeviceKey.Invalid.malformed }
        try self.init(x: parameters.x, y: parameters.y)
    }
}

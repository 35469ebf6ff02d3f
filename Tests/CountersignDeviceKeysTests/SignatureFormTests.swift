import CountersignCore
import Foundation
import JWTKit
import Testing

@testable import CountersignDeviceKeys

/// device-keys rules as plain values: `s` in either form, canonical
/// base64url, answers within their clock skew, proofs bound to their device
/// and used once by their meaning.
@Suite struct SignatureFormTests {
    static let now = Date(timeIntervalSince1970: 1_800_000_000)

    /// The order of P-256, big-endian.
    static let order: [UInt8] = [
        0xFF, 0xFF, 0xFF, 0xFF, 0x00, 0x00, 0x00, 0x00, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
        0xBC, 0xE6, 0xFA, 0xAD, 0xA7, 0x17, 0x9E, 0x84, 0xF3, 0xB9, 0xCA, 0xC2, 0xFC, 0x63, 0x25, 0x51,
    ]

    /// The same signature with `s` replaced by `n − s`: valid for the same key and text, in the other form.
    static func otherForm(_ jws: String) throws -> String {
        let segments = jws.split(separator: ".").map(String.init)
        var signature = try #require(DeviceKey.decode(segments[2]))
        var s = Array(signature.suffix(32))
        var borrow = 0
        for index in stride(from: 31, through: 0, by: -1) {
            let difference = Int(order[index]) - Int(s[index]) - borrow
            s[index] = UInt8((difference + 256) % 256)
            borrow = difference < 0 ? 1 : 0
        }
        signature.replaceSubrange(32..<64, with: s)
        return segments[0] + "." + segments[1] + "." + SecureToken.base64URL(signature)
    }

    /// trust.md: a proof is accepted with its `s` high or low, and both forms
    /// are the same use: one-use holds by meaning, not by text.
    @Test func aProofOfPossessionIsAcceptedInEitherFormAsOneUse() async throws {
        let key = ES256PrivateKey()
        let deviceKey = try DeviceKey(signingKey: key)
        let proof = try await PossessionProof.sign(deviceID: "d1", at: Self.now, with: key)
        #expect(SignatureForm.isCanonical(proof))
        #expect(await PossessionProof.verify(proof, key: deviceKey, deviceID: "d1", now: Self.now))
        #expect(await PossessionProof.verify(proof, key: deviceKey, deviceID: "d2", now: Self.now) == false, "another device's")
        let other = try Self.otherForm(proof)
        #expect(other != proof)
        #expect(SignatureForm.isCanonical(other))
        #expect(await PossessionProof.verify(other, key: deviceKey, deviceID: "d1", now: Self.now))
        let use = await PossessionProof.verifiedUse(proof, key: deviceKey, deviceID: "d1", now: Self.now)
        #expect(use != nil)
        #expect(await PossessionProof.verifiedUse(other, key: deviceKey, deviceID: "d1", now: Self.now) == use)
    }

    @Test func anAnswerIsCheckedClaimByClaimWithinItsSkew() async throws {
        let key = ES256PrivateKey()
        let deviceKey = try DeviceKey(signingKey: key)
        let payload = AnswerSignature.Payload(
            requestId: "r1", decision: "approve", numberCode: "47", iat: Int(Self.now.timeIntervalSince1970), deviceId: "d1")
        let jws = try await AnswerSignature.sign(payload, with: key)
        #expect(await AnswerSignature.verify(jws, key: deviceKey, expected: payload, now: Self.now.addingTimeInterval(120)))
        #expect(await AnswerSignature.verify(jws, key: deviceKey, expected: payload, now: Self.now.addingTimeInterval(121)) == false)
        var other = payload
        other.numberCode = "48"
        #expect(await AnswerSignature.verify(jws, key: deviceKey, expected: other, now: Self.now) == false)
        // The same signature with the other `s`: valid as well, as a keystore's would be.
        #expect(await AnswerSignature.verify(try Self.otherForm(jws), key: deviceKey, expected: payload, now: Self.now))
        // Another key's signature over the same answer is not this device's.
        let stranger = try DeviceKey(signingKey: ES256PrivateKey())
        #expect(await AnswerSignature.verify(jws, key: stranger, expected: payload, now: Self.now) == false)
    }

    @Test func aSegmentSpelledAnotherWayIsNotCanonical() async throws {
        let proof = try await PossessionProof.sign(deviceID: "d1", at: Self.now, with: ES256PrivateKey())
        // 64 bytes are 86 characters: the last one carries 2 bits of padding, which must be zero.
        let segments = proof.split(separator: ".").map(String.init)
        let last = try #require(segments[2].last)
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
        let index = try #require(alphabet.firstIndex(of: last))
        let respelled = segments[0] + "." + segments[1] + "." + segments[2].dropLast() + String(alphabet[index | 1])
        #expect(index & 3 == 0, "a canonical last character has its padding bits clear")
        #expect(!SignatureForm.isCanonical(respelled))
    }
}

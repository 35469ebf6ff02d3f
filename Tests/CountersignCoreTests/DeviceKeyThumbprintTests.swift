import Crypto
import Foundation
import Testing

@testable import CountersignCore

@Suite struct DeviceKeyThumbprintTests {
    /// The P-256 key of RFC 7517 Appendix A.1. Its thumbprint as RFC 7638 §3
    /// defines it (the required members `crv`, `kty`, `x`, `y` in that order, no
    /// white space, SHA-256, base64url without padding), computed apart from this
    /// code with Python's `json.dumps(sort_keys=True, separators=(",", ":"))`,
    /// `hashlib.sha256` and `base64.urlsafe_b64encode`.
    static let x = "MKBCTNIcKUSDii11ySs3526iDZ8AiTo7Tu6KPAqv7D4"
    static let y = "4Etl6SRW2YiLUrN5vfvVHuhp7x8PxltmWWlbbM4IFyM"
    static let expected = "cn-I_WNMClehiVp51i_0VpOENW1upEerA8sEam5hn-s"

    @Test func theThumbprintIsRFC7638s() throws {
        let key = try DeviceKey(jwk: ["kty": "EC", "crv": "P-256", "x": Self.x, "y": Self.y, "kid": "ignored", "use": "sig"])
        #expect(key.json == #"{"crv":"P-256","kty":"EC","x":"\#(Self.x)","y":"\#(Self.y)"}"#)
        #expect(key.thumbprint == Self.expected)
        // The same point read back from storage, or from the key itself, has the same thumbprint.
        #expect(try DeviceKey(stored: key.json).thumbprint == Self.expected)
        #expect(DeviceKey(publicKey: key.publicKey).thumbprint == Self.expected)
    }

    @Test func anotherPointHasAnotherThumbprint() throws {
        let other = DeviceKey(publicKey: P256.Signing.PrivateKey().publicKey)
        #expect(other.thumbprint != Self.expected)
        #expect(other.thumbprint.count == 43)
    }
}

import CountersignCore
import CountersignWire

/// A JWK as a client sends it: its string members. Members of other types
/// (WebCrypto's `"ext": true`, `"key_ops": ["verify"]`) are ignored, as unknown
/// fields are; a key member of the wrong type is then missing, and refused.
struct JWKMembers: Decodable, Sendable {
    let strings: [String: String]

    private struct Name: CodingKey {
        let stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    init(from decoder: any Decoder) throws {
        let members = try decoder.container(keyedBy: Name.self)
        var strings: [String: String] = [:]
        for name in members.allKeys {
            if let value = try? members.decode(String.self, forKey: name) { strings[name.stringValue] = value }
        }
        self.strings = strings
    }
}

extension Field {
    /// A sealing key (`sealKey`): base64url of an uncompressed P-256 point; 400 naming the field otherwise.
    static func sealKey(_ text: String) throws -> SealKey {
        do {
            return try SealKey(base64URL: text)
        } catch .notOnCurve {
            throw APIError.invalidRequest("The field `sealKey` is not a point on the P-256 curve.")
        } catch {
            throw APIError.invalidRequest("The field `sealKey` must be base64url (no padding) of an uncompressed P-256 public key (65 bytes).")
        }
    }

    /// A P-256 public key as a JWK; 400 naming the field otherwise.
    static func deviceKey(_ jwk: JWKMembers, _ name: String) throws -> DeviceKey {
        do {
            return try DeviceKey(jwk: jwk.strings)
        } catch .notOnCurve {
            throw APIError.invalidRequest("The field `\(name)` is not a point on the P-256 curve.")
        } catch {
            throw APIError.invalidRequest(
                "The field `\(name)` must be a P-256 public key as a JWK: {\"kty\": \"EC\", \"crv\": \"P-256\", \"x\": \"…\", \"y\": \"…\"}.")
        }
    }
}

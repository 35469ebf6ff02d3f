import CountersignCore

extension Field {
    /// A P-256 public key as a JWK; 400 naming the field otherwise.
    static func deviceKey(_ jwk: [String: String], _ name: String) throws -> DeviceKey {
        do {
            return try DeviceKey(jwk: jwk)
        } catch .notOnCurve {
            throw APIError.invalidRequest("The field `\(name)` is not a point on the P-256 curve.")
        } catch {
            throw APIError.invalidRequest(
                "The field `\(name)` must be a P-256 public key as a JWK: {\"kty\": \"EC\", \"crv\": \"P-256\", \"x\": \"…\", \"y\": \"…\"}.")
        }
    }
}

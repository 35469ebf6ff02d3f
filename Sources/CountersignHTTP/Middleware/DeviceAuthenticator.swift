import CountersignCore
import Foundation
import HTTPTypes
import Hummingbird

/// Finds the trusted device behind `X-API-Key` (or `Authorization: Bearer`).
struct DeviceAuthenticator: Sendable {
    let accounts: any DeviceDirectory

    func device(for request: Request) async throws -> Device {
        guard let key = Self.apiKey(in: request), SecureToken.isWellFormed(key, maxLength: 128),
            let device = try await accounts.device(apiKeyHash: SecureToken.sha256Hex(key))
        else {
            throw APIError.unauthorized
        }
        return device
    }

    static func apiKey(in request: Request) -> String? {
        if let key = request.headers[.apiKey] { return key.trimmingSpaces() }
        guard let authorization = request.headers[.authorization] else { return nil }
        let parts = authorization.split(separator: " ", maxSplits: 1)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else { return nil }
        return parts[1].trimmingSpaces()
    }
}

import CountersignCore
import Foundation
import HTTPTypes
import Hummingbird

/// Finds the integration behind `Authorization: Bearer csk_…`, as stored now:
/// a rotated or disabled key stops on its next request.
struct IntegrationAuthenticator: Sendable {
    let integrations: any IntegrationStore

    func integration(for request: Request) async throws -> Integration {
        guard let hash = keyHash(of: request), let integration = try await integrations.integration(apiKeyHash: hash), integration.enabled
        else {
            throw APIError.integrationUnauthorized
        }
        return integration
    }

    /// The SHA-256 of the request's `Bearer csk_…` key, if it has a well-formed one.
    func keyHash(of request: Request) -> String? {
        guard let authorization = request.headers[.authorization] else { return nil }
        let parts = authorization.split(separator: " ", maxSplits: 1)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else { return nil }
        let key = parts[1].trimmingSpaces()
        guard key.hasPrefix("csk_"), SecureToken.isWellFormed(key.dropFirst(4), maxLength: 128) else { return nil }
        return SecureToken.sha256Hex(key)
    }
}

import CountersignCore
import Foundation
import HTTPTypes
import Hummingbird

/// Finds the integration behind `Authorization: Bearer csk_…`, as stored now:
/// a rotated or disabled key stops on its next request.
struct IntegrationAuthenticator: Sendable {
    let integrations: any IntegrationStore

    func integration(for request: Request) async throws -> Integration {
        guard let authorization = request.headers[.authorization] else { throw APIError.integrationUnauthorized }
        let parts = authorization.split(separator: " ", maxSplits: 1)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else { throw APIError.integrationUnauthorized }
        let key = parts[1].trimmingSpaces()
        guard key.hasPrefix("csk_"), SecureToken.isWellFormed(key.dropFirst(4), maxLength: 128),
            let integration = try await integrations.integration(apiKeyHash: SecureToken.sha256Hex(key)), integration.enabled
        else {
            throw APIError.integrationUnauthorized
        }
        return integration
    }
}

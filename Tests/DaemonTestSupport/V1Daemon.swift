import CountersignCore
import CountersignRuntime
import Foundation
import NIOHTTP1

/// A relying service's approval, as the approvals API tests create it.
enum V1Fixture {
    static let approval: [String: any Sendable] = [
        "user": Fixture.email, "action": "login", "title": "Sign in to Acme Admin", "body": "Firefox on Linux, near Berlin",
        "context": ["ip": "203.0.113.7", "location": "Berlin, DE"],
    ]
}

extension TestDaemon {
    /// Creates an integration as `countersign integration add` does; returns its id, API key and webhook secret.
    func addIntegration(
        _ name: String, webhookURL: String? = nil, promptsAllUsers: Bool = false
    ) async throws -> (id: String, key: String, secret: String?) {
        let key = Integration.newAPIKey()
        let secret = webhookURL.map { _ in Integration.newWebhookSecret() }
        let integration = Integration(
            id: Integration.newID(), name: name, webhookURL: webhookURL, webhookSecret: secret, enabled: true, createdAt: Date(),
            promptsAllUsers: promptsAllUsers)
        try await server.store.createIntegration(integration, apiKeyHash: SecureToken.sha256Hex(key))
        return (integration.id, key, secret)
    }

    /// A call to the approvals API with an integration's key (`nil`: none).
    func v1(
        _ method: HTTPMethod, _ path: String, key: String?, json: [String: any Sendable]? = nil, headers: [(String, String)] = [],
        timeout: Duration = .seconds(40)
    ) async throws -> Answer {
        try await call(
            method, path, json: json, headers: (key.map { [("Authorization", "Bearer \($0)")] } ?? []) + headers, timeout: timeout)
    }

    /// Enrolls a device for `email` with a fresh code; returns its id, API key and the code used.
    @discardableResult
    func enroll(
        _ email: String, integrationKey: String, deviceName: String = "Phone", fcmToken: String = "unknown"
    ) async throws -> (deviceID: String, apiKey: String, code: String) {
        let issued = try await v1(.POST, "/v1/users/\(email)/enrollments", key: integrationKey)
        guard issued.status == 201, let code = issued["enrollmentCode"], let uri = issued["enrollmentURI"], uri.hasPrefix("countersign://enroll?")
        else {
            throw TestFailure("enrollment code: \(issued.status) \(issued.text)")
        }
        // Valid 10 minutes (approvals-api.md).
        let expiresAt = try issued["expiresAt"].map { try Date.ISO8601FormatStyle(includingFractionalSeconds: true).parse($0) }
        guard expiresAt.map({ abs($0.timeIntervalSinceNow - 600) < 30 }) == true else {
            throw TestFailure("enrollment code not valid for 10 minutes: \(issued.text)")
        }
        let enrolled = try await call(
            .POST, "/api/mobile/auth/enroll",
            json: ["enrollmentCode": code.lowercased(), "deviceName": deviceName, "platform": "iOS", "fcmToken": fcmToken])
        guard enrolled.status == 200, let key = enrolled["apiKey"], let device = enrolled.json["device"] as? [String: any Sendable],
            let id = device["id"] as? String
        else {
            throw TestFailure("enroll: \(enrolled.status) \(enrolled.text)")
        }
        return (id, key, code)
    }
}

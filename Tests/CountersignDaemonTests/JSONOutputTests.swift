import CountersignCore
import CountersignStore
import Foundation
import Logging
import TestSupport
import Testing

/// `--json` on the operator's commands that print something: one object (a line each for a list) a script reads
/// without scraping text, holding what the text holds.
@Suite struct JSONOutputTests {
    func object(_ line: some StringProtocol) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], "\(line)")
    }

    @Test func integrationsKeysAndUsersComeOutAsJSON() async throws {
        let folder = try makeTemporaryFolder("countersign-json")
        defer { try? FileManager.default.removeItem(at: folder) }
        let database = ["--database", folder.appendingPathComponent("countersign.sqlite").path]

        let (status, output) = try await DaemonProcessTests.command(
            ["integration", "add", "app", "--webhook-url", "https://hooks.example.com/countersign", "--json"] + database)
        #expect(status == 0, "\(output)")
        let created = try object(output.trimmingCharacters(in: .newlines))
        let id = try #require(created["id"] as? String)
        let key = try #require(created["apiKey"] as? String)
        #expect(created["name"] as? String == "app")
        #expect(key.hasPrefix("csk_") && (created["webhookSecret"] as? String)?.hasPrefix("whsec_") == true)
        // The key printed is the key stored (as its hash).
        let store = try SQLiteStore(path: database[1], logger: Logger(label: "test"))
        #expect(try await store.integration(apiKeyHash: SecureToken.sha256Hex(key))?.id == id)

        let listed = try await DaemonProcessTests.command(["integration", "list", "--json"] + database).output
        let line = try object(try #require(listed.split(separator: "\n").first))
        #expect(line["id"] as? String == id && line["enabled"] as? Bool == true)
        #expect(line["webhookURL"] as? String == "https://hooks.example.com/countersign")
        #expect(line["apiKey"] == nil)
        #expect(line["webhookDisabledAt"] == nil)

        // A webhook its receiver disabled (410 Gone) says so, in both forms.
        let opened = try SQLiteStore(path: database[1], logger: Logger(label: "test"))
        #expect(
            try await opened.disableWebhook(
                integrationID: id, url: "https://hooks.example.com/countersign", reason: "HTTP 410 Gone from hooks.example.com", at: Date(),
                audit: AuditEvent(kind: .integrationWebhookDisabled)))
        let disabled = try object(
            try #require(try await DaemonProcessTests.command(["integration", "list", "--json"] + database).output.split(separator: "\n").first))
        #expect(disabled["webhookDisabledReason"] as? String == "HTTP 410 Gone from hooks.example.com")
        #expect(disabled["webhookDisabledAt"] is String)
        let text = try await DaemonProcessTests.command(["integration", "list"] + database).output
        #expect(text.contains("disabled since") && text.contains("HTTP 410 Gone from hooks.example.com"), "\(text)")

        let rotated = try object(
            try await DaemonProcessTests.command(["integration", "rotate-key", "app", "--json"] + database).output.trimmingCharacters(in: .newlines))
        let newKey = try #require(rotated["apiKey"] as? String)
        #expect(newKey != key)
        #expect(try await store.integration(apiKeyHash: SecureToken.sha256Hex(newKey))?.id == id)
        #expect(try await store.integration(apiKeyHash: SecureToken.sha256Hex(key)) == nil)

        // An empty list is no line at all.
        #expect(try await DaemonProcessTests.command(["user", "list", "--json"] + database).output.isEmpty)
    }
}

import CountersignCore
import CountersignHTTP
import CountersignRuntime
import CountersignStore
import Foundation
import NIOHTTP1
import TestSupport
import Testing

@testable import DaemonTestSupport

@Suite struct OpenAPIDocumentTests {
    @Test func everyRouteIsDocumented() async throws {
        try await withTemporaryFolder { folder in
            let document = URL(fileURLWithPath: #filePath)
                .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
                .appendingPathComponent("docs/openapi.yaml")
            let text = try String(contentsOf: document, encoding: .utf8)
            let documented = Self.operations(in: text)
            let server = try await buildApplication(configuration: TestDaemon.configuration(folder), logger: LogCapture().logger())
            #expect(server.routes.count >= 12)
            for route in server.routes {
                #expect(documented.contains(route), "\(route) is missing from docs/openapi.yaml")
            }
        }
    }

    static func document() throws -> String {
        try String(
            contentsOf: URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
                .appendingPathComponent("docs/openapi.yaml"), encoding: .utf8)
    }

    /// What generators need: every operation named (`operationId`, each once) and tagged, and every webhook event
    /// the daemon sends under `webhooks:`, with the envelope Standard Webhooks names (`type`, `timestamp`, `data`).
    @Test func everyOperationIsNamedAndTaggedAndEveryEventIsAWebhook() throws {
        let text = try Self.document()
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        let events = lines.drop { $0 != "webhooks:" }.prefix { $0 != "components:" }.filter { $0.hasPrefix("  ") && !$0.hasPrefix("   ") }
        let operations = Self.operations(in: text).count + events.count
        let names = lines.filter { $0.hasPrefix("      operationId: ") }.map { $0.dropFirst("      operationId: ".count) }
        #expect(names.count == operations, "operations without an operationId")
        #expect(Set(names).count == names.count, "an operationId used twice")
        #expect(lines.filter { $0.hasPrefix("      tags: [") }.count == operations)
        let webhooks = Set(lines.drop { $0 != "webhooks:" }.prefix { $0 != "components:" }.filter { $0.hasPrefix("  approval.") })
        for state in ApprovalState.allCases where state != .pending {
            #expect(webhooks.contains("  approval.\(state.rawValue):"), "no webhook for approval.\(state.rawValue)")
        }
        #expect(webhooks.count == ApprovalState.allCases.count - 1)
        #expect(events.contains("  \(WebhookEvent.pingType):"), "no webhook for the test event")
        // The envelope as the daemon writes it.
        var request = ApprovalRequest(
            id: "r1", userID: "u1", subject: "u1", action: try #require(ApprovalAction(rawValue: "login")), state: .approved, createdAt: Date(),
            expiresAt: Date().addingTimeInterval(60),
            completionWindow: 120, updatedAt: Date(), numberCode: nil, newPasswordHash: nil, requester: RequesterInfo(ip: "127.0.0.1", userAgent: nil)
        )
        request.prompt = ApprovalPrompt(
            integrationID: "int_1", integrationName: "app", userEmail: "ana@example.com", title: "Log in", body: "", context: [:])
        let item = try #require(
            WebhookEvent.outboxItem(for: request, after: Transition(from: .pending, to: .approved, cause: .approvedByDevice, at: Date())))
        let envelope = try #require(try JSONSerialization.jsonObject(with: item.payload) as? [String: Any])
        #expect(Set(envelope.keys) == ["id", "type", "timestamp", "createdAt", "data"])
        #expect(envelope["type"] as? String == "approval.approved")
    }

    /// `METHOD /path` for every operation under `paths:` (two-space path keys, four-space methods).
    static func operations(in yaml: String) -> Set<String> {
        var operations = Set<String>()
        var path: String?
        var inPaths = false
        for line in yaml.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("paths:") {
                inPaths = true
                continue
            }
            if inPaths, let first = line.first, first != " " { inPaths = false }
            guard inPaths else { continue }
            if line.hasPrefix("  /") {
                path = String(line.dropFirst(2).dropLast(line.hasSuffix(":") ? 1 : 0))
            } else if line.hasPrefix("    "), !line.hasPrefix("     "), let path {
                let key = line.trimmingCharacters(in: .whitespaces).dropLast()
                if ["get", "post", "put", "delete", "patch"].contains(String(key)) {
                    operations.insert("\(key.uppercased()) \(path)")
                }
            }
        }
        return operations
    }
}

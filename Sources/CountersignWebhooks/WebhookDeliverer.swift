import AsyncHTTPClient
import CountersignCore
import CountersignOutbound
import Foundation
import Logging
import NIOCore
import NIOHTTP1

/// Posts webhook events from the outbox to their integration's URL, signed
/// with its secret as they are now (a changed URL or secret applies to the
/// events still waiting). Any 2xx is delivered; 410 Gone disables the webhook
/// (audited) until a URL is set again; any other answer, a time-out or a
/// connection error is retried by the outbox service.
public struct WebhookDeliverer: OutboxDeliverer {
    let client: WebhookClient
    let approvals: any ApprovalStore
    let integrations: any IntegrationStore
    let timeout: TimeAmount

    public init(client: WebhookClient, approvals: any ApprovalStore, integrations: any IntegrationStore, timeout: TimeAmount = .seconds(10)) {
        self.client = client
        self.approvals = approvals
        self.integrations = integrations
        self.timeout = timeout
    }

    /// The event's integration: named on the row, or (an event queued before rows named it) its approval's.
    /// `nil` when neither is stored any more.
    private func integration(of item: OutboxItem) async throws -> Integration? {
        if let integrationID = item.integrationID { return try await integrations.integration(id: integrationID) }
        guard let approvalID = item.reference, let approval = try await approvals.request(id: approvalID),
            let integrationID = approval.integrationID
        else { return nil }
        return try await integrations.integration(id: integrationID)
    }

    public func auditSubject(of item: OutboxItem) async -> String? {
        (try? await integration(of: item)).flatMap { $0.map { "integration \($0.name)" } }
    }

    public func deliver(_ item: OutboxItem, logger: Logger) async -> DeliveryResult {
        let integration: Integration?
        do {
            integration = try await self.integration(of: item)
        } catch {
            return .retry("cannot read the integration: \(error)")
        }
        guard let integration else { return .failed("its approval or integration is no longer stored") }
        guard let url = integration.webhookURL, integration.webhookSecret != nil else {
            return .failed("integration \(integration.name) has no webhook any more")
        }
        if let problem = Integration.webhookURLProblem(url, publicOnly: integration.webhookPublicOnly) {
            return .failed("integration \(integration.name): \(problem)")
        }
        if let since = integration.webhookDisabledAt {
            return .failed(
                "integration \(integration.name): the webhook is disabled since \(Timestamp.string(since)) (\(integration.webhookDisabledReason ?? "410 Gone")); setting its URL again enables it"
            )
        }
        var request = HTTPClientRequest(url: url)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        request.headers.add(name: "User-Agent", value: "Countersign-Webhooks/1")
        // Standard Webhooks: the event id, the time of this attempt, the signature over both and the body.
        let timestamp = Int(Date().timeIntervalSince1970)
        request.headers.add(name: WebhookSignature.idHeader, value: item.id)
        request.headers.add(name: WebhookSignature.timestampHeader, value: String(timestamp))
        request.headers.add(
            name: WebhookSignature.signatureHeader,
            // After a rotation, the old secret signs too for a day: receivers move over without missing an event.
            value: WebhookSignature.header(
                secrets: integration.webhookSecrets(at: Date(timeIntervalSince1970: TimeInterval(timestamp))), id: item.id, timestamp: timestamp,
                body: item.payload))
        request.body = .bytes(ByteBuffer(bytes: item.payload))
        let host = URL(string: url)?.host ?? "?"
        do {
            // Resolved once per client, checked (http:// only to a loopback address), and connected where it was checked.
            guard let target = URL(string: url) else { return .failed("integration \(integration.name): \(url) is not a URL") }
            let response = try await client.client(for: target, publicOnly: integration.webhookPublicOnly).execute(
                request, timeout: timeout, logger: logger)
            // Read (and bound) the answer so the connection can be reused; its content does not matter.
            _ = try? await response.body.collect(upTo: 64 * 1024)
            let status = Int(response.status.code)
            if (200..<300).contains(status) { return .delivered("integration \(integration.name): HTTP \(status) from \(host)") }
            if status == 410 { return await gone(integration, url: url, host: host) }
            return .retry("integration \(integration.name): HTTP \(status) from \(host)")
        } catch let refusal as CheckedHTTPClients.Refusal {
            return .retry("integration \(integration.name): \(host): \(refusal)")
        } catch {
            return .retry("integration \(integration.name): \(host): \(Self.describe(error))")
        }
    }

    /// The receiver said the endpoint is gone for good (Standard Webhooks, Svix): the webhook is
    /// disabled rather than retried for a day, once, however many events were on their way.
    private func gone(_ integration: Integration, url: String, host: String) async -> DeliveryResult {
        let reason = "HTTP 410 Gone from \(host)"
        let event = AuditEvent(
            kind: .integrationWebhookDisabled, detail: "integration \(integration.name): \(reason); no event is posted until its URL is set again")
        do {
            _ = try await integrations.disableWebhook(integrationID: integration.id, url: url, reason: reason, at: Date(), audit: event)
        } catch {
            return .retry("integration \(integration.name): \(reason), and the webhook could not be disabled: \(error)")
        }
        return .failed("integration \(integration.name): \(reason); the webhook is disabled")
    }

    /// A short reason for the log and `webhook list`.
    static func describe(_ error: any Error) -> String {
        if let error = error as? HTTPClientError {
            switch error {
            case .deadlineExceeded, .readTimeout, .connectTimeout: return "timed out"
            case .remoteConnectionClosed: return "connection closed"
            default: return "\(error)"
            }
        }
        return "\(error)"
    }
}

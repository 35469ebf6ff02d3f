import CountersignCore
import Foundation
import HTTPTypes
import Hummingbird
import Logging

/// A relying service's own webhook (`/v1/webhook`): read and set its URL,
/// rotate its signing secret, send a test event, list its deliveries and
/// send one again. What the operator's `integration set-webhook`,
/// `rotate-webhook-secret` and `webhook list|redeliver` do, for one
/// integration and behind its key: it sees and touches only its own events.
struct WebhookController: Sendable {
    let store: any IntegrationStore
    let authenticator: IntegrationAuthenticator
    let audit: AuditLog
    let abuse: RateLimitGuard
    let bell: OutboxBell?

    func addRoutes(to group: RouterGroup<AppRequestContext>) {
        group.get("webhook", use: show)
        group.put("webhook", use: set)
        group.delete("webhook", use: remove)
        group.post("webhook/rotate-secret", use: rotateSecret)
        group.post("webhook/ping", use: ping)
        group.get("webhook/deliveries", use: deliveries)
        group.post("webhook/deliveries/{eventId}/redeliver", use: redeliver)
    }

    struct WebhookResponse: ResponseEncodable {
        @NullWhenAbsent var url: String?
        /// `false` after the receiver answered 410 Gone: nothing is posted until a URL is set again.
        var enabled: Bool
        @NullWhenAbsent var disabledAt: String?
        @NullWhenAbsent var disabledReason: String?
        /// Until when the secret before the last rotation signs too; `null` when only one signs.
        @NullWhenAbsent var previousSecretUntil: String?
        /// Only in the answer that made it: never shown again.
        var secret: String?

        init(_ integration: Integration, now: Date, secret: String? = nil) {
            url = integration.webhookURL
            enabled = integration.webhookURL != nil && integration.webhookDisabledAt == nil
            disabledAt = integration.webhookDisabledAt.map(Timestamp.string)
            disabledReason = integration.webhookDisabledAt == nil ? nil : integration.webhookDisabledReason
            previousSecretUntil = integration.webhookSecrets(at: now).count > 1 ? integration.previousWebhookSecretUntil.map(Timestamp.string) : nil
            self.secret = secret
        }
    }

    @Sendable func show(_ request: Request, context: AppRequestContext) async throws -> Response {
        let integration = try await authenticator.integration(for: request)
        return try JSONResponse.response(WebhookResponse(integration, now: Date()), status: .ok)
    }

    struct SetBody: Decodable { var url: String }

    /// Sets the URL: https:// to a public host only (its addresses are checked again at each connection),
    /// unlike the operator's, which may name any host. The first URL gets a secret, shown in this answer
    /// only; a later one keeps it. A disabled webhook is enabled again.
    @Sendable func set(_ request: Request, context: AppRequestContext) async throws -> Response {
        let integration = try await authenticator.integration(for: request)
        let body = try await request.decodeJSON(as: SetBody.self, context: context)
        if let problem = Integration.webhookURLProblem(body.url, publicOnly: true) { throw APIError.invalidRequest("`url`: \(problem).") }
        let secret = integration.webhookSecret ?? Integration.newWebhookSecret()
        guard try await store.setWebhook(integrationID: integration.id, url: body.url, secret: secret, publicOnly: true) else {
            throw APIError.integrationUnauthorized
        }
        audit.record(
            AuditEvent(
                kind: .integrationWebhookSet, context: request.auditContext(context),
                detail: "integration \(integration.name): webhook to \(Self.host(body.url)), over the API"))
        guard let updated = try await store.integration(id: integration.id) else { throw APIError.integrationUnauthorized }
        return try JSONResponse.response(WebhookResponse(updated, now: Date(), secret: integration.webhookSecret == nil ? secret : nil), status: .ok)
    }

    /// Removes the URL: no more events are posted (those queued fail). The secret goes with it.
    @Sendable func remove(_ request: Request, context: AppRequestContext) async throws -> Response {
        let integration = try await authenticator.integration(for: request)
        _ = try await request.readBody(context: context)
        guard try await store.setWebhook(integrationID: integration.id, url: nil, secret: nil) else { throw APIError.integrationUnauthorized }
        audit.record(
            AuditEvent(
                kind: .integrationWebhookSet, context: request.auditContext(context),
                detail: "integration \(integration.name): webhook removed, over the API"))
        guard let updated = try await store.integration(id: integration.id) else { throw APIError.integrationUnauthorized }
        return try JSONResponse.response(WebhookResponse(updated, now: Date()), status: .ok)
    }

    /// A new secret, shown once; the current one keeps signing beside it for 24 hours.
    @Sendable func rotateSecret(_ request: Request, context: AppRequestContext) async throws -> Response {
        let integration = try await authenticator.integration(for: request)
        _ = try await request.readBody(context: context)
        let secret = Integration.newWebhookSecret()
        let now = Date()
        guard
            try await store.rotateWebhookSecret(
                integrationID: integration.id, secret: secret, previousUntil: now.addingTimeInterval(Integration.webhookSecretOverlap))
        else { throw APIError.noWebhook }
        audit.record(
            AuditEvent(
                kind: .integrationWebhookSet, context: request.auditContext(context),
                detail: "integration \(integration.name): webhook secret rotated over the API; the old one signs too for 24 h"))
        guard let updated = try await store.integration(id: integration.id) else { throw APIError.integrationUnauthorized }
        return try JSONResponse.response(WebhookResponse(updated, now: now, secret: secret), status: .ok)
    }

    struct QueuedResponse: ResponseEncodable {
        var eventId: String
    }

    /// Queues a `webhook.ping` event, signed and retried as every event is. One waits at a time.
    @Sendable func ping(_ request: Request, context: AppRequestContext) async throws -> Response {
        let integration = try await authenticator.integration(for: request)
        _ = try await request.readBody(context: context)
        guard integration.webhookURL != nil else { throw APIError.noWebhook }
        if integration.webhookDisabledAt != nil { throw APIError.webhookDisabled }
        try await abuse.hit(
            .webhookSendsPerIntegration, integration.id, "Too many test events and redeliveries. Please try again later.", context: context,
            request: request)
        guard let item = WebhookEvent.ping(for: integration, at: Date()) else { throw APIError.internalError }
        guard try await store.queueWebhookPing(item, integrationID: integration.id) else { throw APIError.pingWaiting }
        bell?.ring()
        audit.record(
            AuditEvent(kind: .webhookPinged, context: request.auditContext(context), detail: "event \(item.id), integration \(integration.name)"))
        return try JSONResponse.response(QueuedResponse(eventId: item.id), status: .accepted)
    }

    struct DeliveriesResponse: ResponseEncodable {
        struct Item: Encodable {
            var eventId: String
            var type: String?
            /// The approval the event tells of; `null` for a test event.
            @NullWhenAbsent var approvalId: String?
            /// `pending`, `delivered`, `failed` or `dropped`.
            var state: String
            var attempts: Int
            var createdAt: String
            /// When the next attempt is due, while it is pending.
            @NullWhenAbsent var nextAttemptAt: String?
            @NullWhenAbsent var finishedAt: String?
            @NullWhenAbsent var lastError: String?
        }
        var deliveries: [Item]
    }

    /// Its own deliveries, newest first: `?failed=true` for those failed, dropped or being retried; `?limit=` 1–500 (50).
    @Sendable func deliveries(_ request: Request, context: AppRequestContext) async throws -> Response {
        let integration = try await authenticator.integration(for: request)
        let failed: Bool
        switch request.uri.queryParameters.get("failed") {
        case nil, "false": failed = false
        case "true": failed = true
        default: throw APIError.invalidRequest("`failed` is `true` or `false`.")
        }
        var limit = 50
        if let text = request.uri.queryParameters.get("limit") {
            guard let value = Int(text), (1...500).contains(value) else { throw APIError.invalidRequest("`limit` is a number from 1 to 500.") }
            limit = value
        }
        let entries = try await store.webhookDeliveries(integrationID: integration.id, failedOnly: failed, limit: limit)
        let items = entries.map { entry in
            let envelope = entry.payload.flatMap(WebhookEvent.Envelope.init)
            return DeliveriesResponse.Item(
                eventId: entry.id, type: envelope?.type, approvalId: envelope?.data.approvalId, state: entry.state, attempts: entry.attempts,
                createdAt: Timestamp.string(entry.createdAt), nextAttemptAt: entry.state == "pending" ? Timestamp.string(entry.nextAttemptAt) : nil,
                finishedAt: entry.finishedAt.map(Timestamp.string), lastError: entry.lastError)
        }
        return try JSONResponse.response(DeliveriesResponse(deliveries: items), status: .ok)
    }

    /// Sends one of its own events again, due now, for another 24 hours of retries.
    @Sendable func redeliver(_ request: Request, context: AppRequestContext) async throws -> Response {
        let integration = try await authenticator.integration(for: request)
        _ = try await request.readBody(context: context)
        let eventID = try context.parameters.require("eventId")
        guard eventID.utf8.count <= 64 else { throw APIError.eventNotFound }
        try await abuse.hit(
            .webhookSendsPerIntegration, integration.id, "Too many test events and redeliveries. Please try again later.", context: context,
            request: request)
        // Only an event whose delivery ended: one being retried keeps its attempts and its 24 hours.
        guard let about = try await store.redeliverWebhook(eventID: eventID, integrationID: integration.id, finishedOnly: true, now: Date())
        else { throw APIError.eventNotFound }
        bell?.ring()
        // An approval's event is filed under the approval's log reference; a test event under none.
        let reference = about == integration.id ? nil : ApprovalRequest.logReference(of: about)
        audit.record(
            AuditEvent(
                kind: .webhookRedelivered, requestRef: reference, context: request.auditContext(context),
                detail: "event \(eventID), integration \(integration.name), over the API"))
        return try JSONResponse.response(QueuedResponse(eventId: eventID), status: .accepted)
    }

    /// A URL's host, for the audit trail (never its path or query, which may carry a token).
    static func host(_ url: String) -> String { URL(string: url)?.host ?? "?" }
}

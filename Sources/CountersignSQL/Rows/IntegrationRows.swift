import CountersignCore
import Foundation

extension Integration {
    @inlinable public init(row: some SQLRow) throws {
        self.init(
            id: try row.get("id"), name: try row.get("name"), webhookURL: try row.get("webhook_url"), webhookSecret: try row.get("webhook_secret"),
            enabled: try row.get("enabled"), createdAt: try row.get("created_at"), previousWebhookSecret: try row.get("webhook_secret_previous"),
            previousWebhookSecretUntil: try row.get("webhook_secret_previous_until"), promptsAllUsers: try row.get("prompt_all_users"),
            webhookDisabledAt: try row.get("webhook_disabled_at"), webhookDisabledReason: try row.get("webhook_disabled_reason"),
            webhookPublicOnly: try row.get("webhook_public_only"))
    }
}

extension OutboxEntry {
    /// `nil` for a kind this version does not know.
    @inlinable public init?(row: some SQLRow) throws {
        guard let kind = OutboxKind(rawValue: try row.get("kind")) else { return nil }
        self.init(
            id: try row.get("id"), kind: kind, reference: try row.get("reference"), state: try row.get("state"), attempts: try row.get("attempts"),
            createdAt: try row.get("created_at"), nextAttemptAt: try row.get("next_attempt_at"), finishedAt: try row.get("finished_at"),
            lastError: try row.get("last_error"), payload: kind == .webhook ? try row.get("payload") : nil)
    }
}

extension IdempotencyRecord {
    @inlinable public init(row: some SQLRow) throws {
        self.init(
            integrationID: try row.get("integration_id"), key: try row.get("key"), requestHash: try row.get("request_hash"),
            approvalID: try row.get("approval_id"), answer: try row.get("answer"), createdAt: try row.get("created_at"))
    }
}

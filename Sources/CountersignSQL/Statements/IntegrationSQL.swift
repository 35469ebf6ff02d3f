import CountersignCore
import Foundation

/// Integrations, their grants, enrollment codes and idempotency records: the statements both stores run.
public enum IntegrationSQL {
    /// A row only when it inserted (the name is free).
    public static func insert(_ integration: Integration, apiKeyHash: String) -> SQLStatement {
        """
        INSERT INTO integrations (id, name, api_key_hash, webhook_url, webhook_secret, enabled, created_at, prompt_all_users)
        VALUES (\(integration.id), \(integration.name), \(apiKeyHash), \(integration.webhookURL), \(integration.webhookSecret),
            \(integration.enabled), \(integration.createdAt), \(integration.promptsAllUsers))
        ON CONFLICT (name) DO NOTHING RETURNING id
        """
    }

    public static let all: SQLStatement = "SELECT * FROM integrations ORDER BY name"
    public static func integration(id: String) -> SQLStatement { "SELECT * FROM integrations WHERE id = \(id)" }
    public static func integration(apiKeyHash: String) -> SQLStatement { "SELECT * FROM integrations WHERE api_key_hash = \(apiKeyHash)" }

    public static func setKey(id: String, apiKeyHash: String) -> SQLStatement {
        "UPDATE integrations SET api_key_hash = \(apiKeyHash) WHERE id = \(id) RETURNING id"
    }

    public static func setPromptsAllUsers(id: String, on: Bool) -> SQLStatement {
        "UPDATE integrations SET prompt_all_users = \(on) WHERE id = \(id) RETURNING id"
    }

    /// The user if the integration may prompt it: its own, granted to it, or (for an integration the operator let
    /// prompt every user) any user with a device. Column `reached`: `true` for own or granted.
    public static func user(email: String, promptableBy integrationID: String) -> SQLStatement {
        """
        SELECT u.*, (u.owner_integration_id IS NOT NULL AND u.owner_integration_id = \(integrationID))
                OR EXISTS (SELECT 1 FROM integration_grants g WHERE g.user_id = u.id AND g.integration_id = \(integrationID)) AS reached,
            EXISTS (SELECT 1 FROM devices d WHERE d.user_id = u.id) AS enrolled
        FROM users u WHERE u.email = \(email)
        """
    }

    /// A row when the integration has a webhook URL: the condition under which
    /// ``ApprovalSQL/queueWebhook(_:integrationID:)`` queues an event.
    public static func hasWebhook(integrationID: String) -> SQLStatement {
        "SELECT 1 AS present FROM integrations WHERE id = \(integrationID) AND webhook_url IS NOT NULL"
    }

    /// A row when the integration may still prompt user `userID` (the `/v1/approvals/{id}/…` routes).
    public static func reaches(integrationID: String, userID: String, all: Bool) -> SQLStatement {
        """
        SELECT 1 AS reached FROM users u WHERE u.id = \(userID) AND (u.owner_integration_id = \(integrationID)
            OR EXISTS (SELECT 1 FROM integration_grants g WHERE g.user_id = u.id AND g.integration_id = \(integrationID))
            OR (\(all) AND EXISTS (SELECT 1 FROM devices d WHERE d.user_id = u.id)))
        """
    }

    public static func setEnabled(id: String, enabled: Bool) -> SQLStatement {
        "UPDATE integrations SET enabled = \(enabled) WHERE id = \(id) RETURNING id"
    }

    /// The current secret becomes the previous one until `previousUntil` (only with a webhook set).
    public static func rotateWebhookSecret(integrationID: String, secret: String, previousUntil: Date) -> SQLStatement {
        """
        UPDATE integrations SET webhook_secret_previous = webhook_secret, webhook_secret_previous_until = \(previousUntil),
            webhook_secret = \(secret)
        WHERE id = \(integrationID) AND webhook_url IS NOT NULL AND webhook_secret IS NOT NULL RETURNING id
        """
    }

    /// A secret replaced here (`--rotate-secret`, or the webhook removed) stops at once, the previous one too.
    public static func setWebhook(integrationID: String, url: String?, secret: String?, publicOnly: Bool, _ dialect: SQLDialect) -> SQLStatement {
        let same = dialect.isNotDistinctFrom
        return """
            UPDATE integrations SET webhook_url = \(url),
                webhook_secret_previous = CASE WHEN webhook_secret \(unsafe: same) \(secret) THEN webhook_secret_previous END,
                webhook_secret_previous_until = CASE WHEN webhook_secret \(unsafe: same) \(secret) THEN webhook_secret_previous_until END,
                webhook_secret = \(secret), webhook_disabled_at = NULL, webhook_disabled_reason = NULL,
                webhook_public_only = \(publicOnly)
            WHERE id = \(integrationID) RETURNING id
            """
    }

    /// Unused codes of an integration stop working (disabled, or its key rotated).
    public static func voidEnrollments(integrationID: String) -> SQLStatement {
        "DELETE FROM enrollments WHERE integration_id = \(integrationID) AND used_at IS NULL RETURNING code_hash"
    }

    /// A user an integration creates: no password (the empty hash matches none; login checks a decoy instead).
    /// A row only when it inserted.
    public static func insertOwnedUser(_ user: User, integrationID: String) -> SQLStatement {
        """
        INSERT INTO users (id, email, password_hash, created_at, owner_integration_id)
        VALUES (\(user.id), \(user.email), '', \(user.createdAt), \(integrationID))
        ON CONFLICT (email) DO NOTHING RETURNING id
        """
    }

    public static func user(email: String, ownedBy integrationID: String) -> SQLStatement {
        "SELECT * FROM users WHERE email = \(email) AND owner_integration_id = \(integrationID)"
    }

    /// A row only when the grant is new.
    public static func grant(integrationID: String, userID: String, at: Date) -> SQLStatement {
        """
        INSERT INTO integration_grants (integration_id, user_id, created_at) VALUES (\(integrationID), \(userID), \(at))
        ON CONFLICT DO NOTHING RETURNING user_id
        """
    }

    public static func revokeGrant(integrationID: String, userID: String) -> SQLStatement {
        "DELETE FROM integration_grants WHERE integration_id = \(integrationID) AND user_id = \(userID) RETURNING user_id"
    }

    /// Codes issued under a grant die with it.
    public static func voidEnrollments(integrationID: String, userID: String) -> SQLStatement {
        "DELETE FROM enrollments WHERE integration_id = \(integrationID) AND user_id = \(userID) AND used_at IS NULL RETURNING code_hash"
    }

    public static func device(id: String) -> SQLStatement { "SELECT * FROM devices WHERE id = \(id)" }

    /// One statement: a rotation or a disable that commits first leaves nothing to insert. With `apiKeyHash`,
    /// only while the integration still has that key.
    public static func insertEnrollment(
        codeHash: String, userID: String, integrationID: String, apiKeyHash: String?, createdAt: Date, expiresAt: Date
    ) -> SQLStatement {
        """
        INSERT INTO enrollments (code_hash, user_id, integration_id, created_at, expires_at)
        SELECT \(codeHash), \(userID), \(integrationID), \(createdAt), \(expiresAt)
        WHERE EXISTS (
            SELECT 1 FROM integrations WHERE id = \(integrationID) AND enabled
                AND (CAST(\(apiKeyHash) AS TEXT) IS NULL OR api_key_hash = \(apiKeyHash)))
        RETURNING code_hash
        """
    }

    /// Takes an enrollment code: one conditional update, so that of racing redeemers one gets the row
    /// (`user_id`, `integration_id`: unqualified, as SQLite's RETURNING allows only the updated table's
    /// columns; neither joined table has a column of those names). Only an unused, unexpired code of an enabled integration that still reaches the user.
    public static func redeemEnrollment(codeHash: String, now: Date) -> SQLStatement {
        """
        UPDATE enrollments AS e SET used_at = \(now)
        FROM integrations i, users u
        WHERE e.code_hash = \(codeHash) AND e.used_at IS NULL AND e.expires_at > \(now)
            AND i.id = e.integration_id AND i.enabled AND u.id = e.user_id
            AND (u.owner_integration_id = e.integration_id
                OR EXISTS (SELECT 1 FROM integration_grants g WHERE g.user_id = u.id AND g.integration_id = e.integration_id))
        RETURNING user_id, integration_id
        """
    }

    public static func idempotencyRecord(integrationID: String, key: String, since: Date) -> SQLStatement {
        "SELECT * FROM idempotency_keys WHERE integration_id = \(integrationID) AND key = \(key) AND created_at > \(since)"
    }

    /// The webhook events, newest first (with `integrationID`, one integration's only); with `failedOnly`,
    /// those given up on or failing.
    public static func webhookDeliveries(integrationID: String?, failedOnly: Bool, limit: Int, _ dialect: SQLDialect) -> SQLStatement {
        """
        SELECT * FROM outbox WHERE kind = 'webhook'
            AND (CAST(\(integrationID) AS TEXT) IS NULL OR integration_id = \(integrationID))
            AND (NOT \(failedOnly) OR state IN ('failed', 'dropped') OR (state = 'pending' AND attempts > 0 AND last_error IS NOT NULL))
        ORDER BY created_at DESC, \(unsafe: dialect.outboxInsertionOrder) DESC LIMIT \(limit)
        """
    }

    /// Sends a webhook event again from now (column `reference`: what it is about), unless a node is sending it;
    /// with `integrationID`, only one of that integration's.
    public static func redeliverWebhook(
        eventID: String, integrationID: String?, finishedOnly: Bool, now: Date, _ dialect: SQLDialect
    ) -> SQLStatement {
        """
        UPDATE outbox SET state = 'pending', next_attempt_at = \(now), deadline = \(now.addingTimeInterval(WebhookEvent.deliveryWindow)),
            attempts = 0, \(unsafe: dialect.clearLease), last_error = NULL, finished_at = NULL
        WHERE id = \(eventID) AND kind = 'webhook' AND payload IS NOT NULL AND (state != 'pending' OR lease_until IS NULL)
            AND (CAST(\(integrationID) AS TEXT) IS NULL OR integration_id = \(integrationID)) AND (NOT \(finishedOnly) OR state != 'pending')
        RETURNING reference
        """
    }

    /// A test event, only for an integration with a webhook not disabled and no test event of its own waiting.
    public static func queuePing(_ item: OutboxItem, integrationID: String) -> SQLStatement {
        """
        INSERT INTO outbox (id, kind, reference, user_id, payload, state, created_at, next_attempt_at, deadline, attempts, integration_id)
        SELECT \(item.id), 'webhook', \(item.reference), NULL, \(item.payload), 'pending', \(item.createdAt), \(item.nextAttemptAt),
            \(item.deadline), 0, \(integrationID)
        WHERE EXISTS (SELECT 1 FROM integrations i WHERE i.id = \(integrationID) AND i.webhook_url IS NOT NULL
                AND i.webhook_disabled_at IS NULL)
            AND NOT EXISTS (SELECT 1 FROM outbox o WHERE o.kind = 'webhook' AND o.state = 'pending' AND o.reference = \(integrationID))
        RETURNING id
        """
    }

    public static func disableWebhook(integrationID: String, url: String, reason: String, at: Date) -> SQLStatement {
        """
        UPDATE integrations SET webhook_disabled_at = \(at), webhook_disabled_reason = \(reason)
        WHERE id = \(integrationID) AND webhook_url = \(url) AND webhook_disabled_at IS NULL RETURNING id
        """
    }

    /// Upkeep: enrollment codes, idempotency keys and used proofs past their use.
    public static func prune(now: Date) -> [SQLStatement] {
        [
            "DELETE FROM enrollments WHERE expires_at < \(now) RETURNING code_hash",
            "DELETE FROM idempotency_keys WHERE created_at < \(now.addingTimeInterval(-IdempotencyRecord.window)) RETURNING key",
            AccountSQL.forgetProofs(expiredBy: now),
        ]
    }
}

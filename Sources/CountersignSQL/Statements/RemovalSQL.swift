import CountersignCore
import Foundation

/// Erasing a user and deleting an integration: the statements both stores run, in one
/// transaction each (the live requests are read and cancelled first, one by one, as the
/// state machine decides).
public enum RemovalSQL {
    /// A user's live requests (pending, or approved and not completed); those made while the user's
    /// prompts were silenced name the user as their subject alone.
    public static func liveRequests(userID: String) -> SQLStatement {
        "SELECT * FROM approval_requests WHERE (user_id = \(userID) OR subject = \(userID)) AND state IN ('pending', 'approved')"
    }

    /// An integration's live approvals.
    public static func liveRequests(integrationID: String) -> SQLStatement {
        "SELECT * FROM approval_requests WHERE integration_id = \(integrationID) AND state IN ('pending', 'approved')"
    }

    /// Cancels a live request for a removal, as the state machine decides
    /// (``ApprovalStateMachine/cancelForRemoval(_:at:)``): the conditional update that stores it,
    /// its audit event and (for an integration's approval, with `webhook`) the statement that
    /// queues its event. `nil` when it is no longer live.
    public static func cancellation(
        of request: ApprovalRequest, _ cause: TransitionCause, at now: Date, webhook: Bool
    ) -> (cancelled: CancelledRequest, update: SQLStatement, audit: AuditEvent, event: SQLStatement?)? {
        var machine = ApprovalStateMachine(request)
        guard let change = machine.cancelForRemoval(cause, at: now), let update = ApprovalSQL.transition(change, of: machine.request, writtenAt: now)
        else { return nil }
        var event: SQLStatement?
        if webhook, let integrationID = request.integrationID, let item = WebhookEvent.outboxItem(for: machine.request, after: change) {
            event = ApprovalSQL.queueWebhook(item, integrationID: integrationID)
        }
        return (
            CancelledRequest(id: request.id, from: change.from, cause: cause), update, CancelledRequest.auditEvent(change, machine.request), event
        )
    }

    public static func deviceCount(userID: String) -> SQLStatement {
        "SELECT COUNT(*) AS n FROM devices WHERE user_id = \(userID)"
    }

    /// The user's audit events name it by `pseudonym` instead of `email`: the email column (set on
    /// every event of the user, so that a search by the pseudonym finds them all) and the detail.
    public static func pseudonymize(userID: String, email: String, pseudonym: String) -> SQLStatement {
        """
        UPDATE audit_events SET email = \(pseudonym), detail = REPLACE(detail, \(email), \(pseudonym))
        WHERE user_id = \(userID) OR email = \(email) RETURNING id
        """
    }

    /// What goes with the user, the user last (its devices, requests, email resets, enrollment
    /// codes, grants and bypass codes follow it by their foreign keys). The last statement
    /// returns a row when the user was there. Webhook events that ended lose their body (it
    /// names the user): they cannot be sent again; those still on their way lose it when they end.
    public static func erase(userID: String, email: String) -> [SQLStatement] {
        [
            """
            DELETE FROM idempotency_keys
            WHERE approval_id IN (SELECT id FROM approval_requests WHERE user_id = \(userID) OR subject = \(userID)) RETURNING key
            """,
            """
            UPDATE outbox SET payload = NULL
            WHERE kind = 'webhook' AND state != 'pending' AND payload IS NOT NULL AND (user_id = \(userID)
                OR reference IN (SELECT id FROM approval_requests WHERE user_id = \(userID) OR subject = \(userID)))
            RETURNING id
            """,
            "DELETE FROM outbox WHERE kind = 'mail' AND user_id = \(userID) RETURNING id",
            "DELETE FROM used_proofs WHERE device_id IN (SELECT id FROM devices WHERE user_id = \(userID)) RETURNING device_id",
            "DELETE FROM email_resets WHERE user_id = \(userID) OR email = \(email) RETURNING id",
            "DELETE FROM approval_requests WHERE subject = \(userID) RETURNING id",
            "DELETE FROM users WHERE id = \(userID) RETURNING id",
        ]
    }

    /// What ends with an integration, before its row: counted by the caller (enrollment codes,
    /// grants, idempotency records, owned users released, waiting webhook events dropped).
    public static func endIntegration(id: String, at: Date) -> (grants: SQLStatement, users: SQLStatement, events: SQLStatement, rest: [SQLStatement])
    {
        (
            grants: "DELETE FROM integration_grants WHERE integration_id = \(id) RETURNING user_id",
            users: "UPDATE users SET owner_integration_id = NULL WHERE owner_integration_id = \(id) RETURNING id",
            events: """
            UPDATE outbox SET state = 'dropped', finished_at = \(at), payload = NULL, last_error = 'its integration was deleted'
            WHERE kind = 'webhook' AND state = 'pending' AND (integration_id = \(id)
                OR (integration_id IS NULL AND reference IN (SELECT a.id FROM approval_requests a WHERE a.integration_id = \(id))))
            RETURNING id
            """,
            rest: [
                "DELETE FROM enrollments WHERE integration_id = \(id) RETURNING code_hash",
                "DELETE FROM idempotency_keys WHERE integration_id = \(id) RETURNING key",
            ]
        )
    }

    public static func deleteIntegration(id: String) -> SQLStatement {
        "DELETE FROM integrations WHERE id = \(id) RETURNING id"
    }
}

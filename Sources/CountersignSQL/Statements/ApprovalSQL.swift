import CountersignCore
import Foundation

/// Approval requests and the webhook events their transitions queue: the statements both stores run.
/// Which change a transition makes is decided by ``ApprovalStateMachine``; these only store it.
public enum ApprovalSQL {
    /// Frees an idempotency key older than its window (it may be used again).
    public static func forgetStaleKey(_ record: IdempotencyRecord) -> SQLStatement {
        """
        DELETE FROM idempotency_keys WHERE integration_id = \(record.integrationID) AND key = \(record.key)
            AND created_at <= \(record.createdAt.addingTimeInterval(-IdempotencyRecord.window)) RETURNING key
        """
    }

    /// A row only when the key was free. On PostgreSQL a racing insert of the same key waits for the other's commit, then finds it taken.
    public static func insertKey(_ record: IdempotencyRecord, at now: Date) -> SQLStatement {
        """
        INSERT INTO idempotency_keys (integration_id, key, request_hash, approval_id, answer, created_at)
        VALUES (\(record.integrationID), \(record.key), \(record.requestHash), \(record.approvalID), \(record.answer), \(now))
        ON CONFLICT DO NOTHING RETURNING key
        """
    }

    /// The requests a new one replaces: pending, unexpired, for the same subject, action and integration.
    public static func supersedable(by request: ApprovalRequest, _ dialect: SQLDialect) -> SQLStatement {
        """
        SELECT * FROM approval_requests
        WHERE subject = \(request.subject) AND action = \(request.action.rawValue)
            AND integration_id \(unsafe: dialect.isNotDistinctFrom) \(request.integrationID) AND state = 'pending'
            AND expires_at > \(request.createdAt)
        """
    }

    public static func insert(_ request: ApprovalRequest, prompt: String?) -> SQLStatement {
        """
        INSERT INTO approval_requests (
            id, user_id, subject, action, state, created_at, expires_at, completion_window,
            complete_by, updated_at, number_code_salt, number_code_hash, new_password_hash,
            requester_ip, requester_user_agent, responding_device_id, integration_id, prompt)
        VALUES (
            \(request.id), \(request.userID), \(request.subject), \(request.action.rawValue), \(request.state.rawValue),
            \(request.createdAt), \(request.expiresAt), \(request.completionWindow), \(request.completeBy), \(request.updatedAt),
            \(request.numberCode?.salt), \(request.numberCode?.hash), \(request.newPasswordHash), \(request.requester.ip),
            \(request.requester.userAgent), \(request.respondingDeviceID), \(request.integrationID), \(prompt))
        """
    }

    public static func request(id: String) -> SQLStatement { "SELECT * FROM approval_requests WHERE id = \(id)" }
    public static let live: SQLStatement = "SELECT * FROM approval_requests WHERE state IN ('pending', 'approved')"

    public static func pending(userID: String, now: Date) -> SQLStatement {
        """
        SELECT * FROM approval_requests WHERE user_id = \(userID) AND state = 'pending' AND expires_at > \(now)
        ORDER BY created_at DESC
        """
    }

    /// Live requests whose deadline has passed. The `state IN` term lets both databases use the index of live requests.
    public static func due(now: Date, limit: Int) -> SQLStatement {
        """
        SELECT * FROM approval_requests
        WHERE state IN ('pending', 'approved')
            AND ((state = 'pending' AND expires_at <= \(now)) OR (state = 'approved' AND complete_by <= \(now)))
        LIMIT \(limit)
        """
    }

    /// Columns `state` and `n`.
    public static let liveCounts: SQLStatement =
        "SELECT state, COUNT(*) AS n FROM approval_requests WHERE state IN ('pending', 'approved') GROUP BY state"

    /// The reset's held hash (columns `user_id`, `new_password_hash`), read before the completion clears it.
    public static func heldPassword(requestID: String) -> SQLStatement {
        "SELECT user_id, new_password_hash FROM approval_requests WHERE id = \(requestID)"
    }

    /// Stores a transition `request` went through (its fields as the state machine left them): a
    /// conditional update that changes the row only if it is still in the transition's `from` state
    /// and the write comes before its deadline (after it, for a time-out). `nil` from a terminal state.
    public static func transition(_ transition: Transition, of request: ApprovalRequest, writtenAt: Date) -> SQLStatement? {
        let deadline: SQLFragment
        switch (transition.from, transition.cause == .timedOut) {
        case (.pending, false): deadline = "expires_at >"
        case (.pending, true): deadline = "expires_at <="
        case (.approved, false): deadline = "complete_by >"
        case (.approved, true): deadline = "complete_by <="
        default: return nil  // terminal states never change
        }
        return """
            UPDATE approval_requests
            SET state = \(transition.to.rawValue), updated_at = \(transition.at), complete_by = \(request.completeBy),
                new_password_hash = CASE WHEN \(transition.clearsPasswordHash) THEN NULL ELSE new_password_hash END,
                responding_device_id = \(request.respondingDeviceID), device_key_bound = \(request.deviceKeyBound),
                answered_via = \(request.via?.rawValue), version = version + 1
            WHERE id = \(request.id) AND state = \(transition.from.rawValue) AND \(unsafe: deadline) \(writtenAt)
            RETURNING id
            """
    }

    /// A completed phone reset: the user's unused email code and link stop working (one recovery at a time).
    /// Email resets before the user: the order an email reset's redemption locks them in.
    public static func replaceEmailResets(userID: String, at: Date) -> SQLStatement {
        "UPDATE email_resets SET state = 'replaced', finished_at = \(at) WHERE user_id = \(userID) AND state = 'active' RETURNING id"
    }

    /// Queues a webhook event of an integration's approval, only if the integration has a webhook now
    /// (one a 410 disabled too: the event is kept, failed, for a redelivery once a URL is set again).
    public static func queueWebhook(_ event: OutboxItem, integrationID: String) -> SQLStatement {
        """
        INSERT INTO outbox (id, kind, reference, user_id, payload, state, created_at, next_attempt_at, deadline, attempts, integration_id)
        SELECT \(event.id), \(event.kind.rawValue), \(event.reference), \(event.userID), \(event.payload), 'pending',
            \(event.createdAt), \(event.nextAttemptAt), \(event.deadline), 0, \(integrationID)
        WHERE EXISTS (SELECT 1 FROM integrations WHERE id = \(integrationID) AND webhook_url IS NOT NULL)
        RETURNING id
        """
    }
}

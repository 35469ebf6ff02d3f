import CountersignCore
import Foundation
import PostgresNIO

extension PostgresStore: ApprovalStore {
    /// Other nodes change requests too: the broker reads through.
    public var isShared: Bool { true }

    public func insert(
        _ request: ApprovalRequest, idempotency: IdempotencyRecord?, supersededEvent: @escaping @Sendable (ApprovalRequest) -> OutboxItem?
    ) async throws -> [ApprovalRequest] {
        let prompt = try request.prompt?.storedJSON()
        let now = request.createdAt.stored
        return try await transaction { connection in
            if let idempotency {
                // A key older than its window is free again.
                let stale = idempotency.createdAt.addingTimeInterval(-IdempotencyRecord.window).stored
                try await connection.run(
                    """
                    DELETE FROM idempotency_keys WHERE integration_id = \(idempotency.integrationID) AND key = \(idempotency.key)
                        AND created_at <= \(stale) RETURNING key
                    """, self.logger)
                // A racing insert of the same key waits here for the other's commit, then finds it taken.
                let inserted = try await connection.run(
                    """
                    INSERT INTO idempotency_keys (integration_id, key, request_hash, approval_id, answer, created_at)
                    VALUES (\(idempotency.integrationID), \(idempotency.key), \(idempotency.requestHash), \(idempotency.approvalID),
                        \(idempotency.answer), \(now))
                    ON CONFLICT DO NOTHING RETURNING key
                    """, self.logger)
                if inserted == 0 { throw IdempotencyKeyTaken() }
            }
            // Creates for one subject and action take turns: a racing one waits here, then sees this one's row pending.
            try await Self.serialize("approval", request.subject + "\u{1F}" + request.action.rawValue, connection, self.logger)
            // Locked: a racing insert for the same subject waits, then no longer sees them pending.
            let superseded = try await connection.rows(
                """
                SELECT * FROM approval_requests
                WHERE subject = \(request.subject) AND action = \(request.action.rawValue)
                    AND integration_id IS NOT DISTINCT FROM \(request.integrationID) AND state = 'pending' AND expires_at > \(now)
                FOR UPDATE
                """, self.logger
            ).map(ApprovalRequest.init(row:))
            for old in superseded {
                if let event = supersededEvent(old) { try await Self.queueWebhook(event, integrationID: old.integrationID, connection, self.logger) }
                // The same change as ApprovalStateMachine.supersede(at:).
                try await connection.run(
                    """
                    UPDATE approval_requests SET state = 'cancelled', updated_at = \(now), new_password_hash = NULL, version = version + 1
                    WHERE id = \(old.id) AND state = 'pending' RETURNING id
                    """, self.logger)
                try await Self.notify(old.id, connection, self.logger)
            }
            try await connection.run(
                """
                INSERT INTO approval_requests (
                    id, user_id, subject, action, state, created_at, expires_at, completion_window,
                    complete_by, updated_at, number_code_salt, number_code_hash, new_password_hash,
                    requester_ip, requester_user_agent, responding_device_id, integration_id, prompt)
                VALUES (
                    \(request.id), \(request.userID), \(request.subject), \(request.action.rawValue), \(request.state.rawValue),
                    \(now), \(request.expiresAt.stored), \(request.completionWindow), \(request.completeBy?.stored), \(request.updatedAt.stored),
                    \(request.numberCode?.salt), \(request.numberCode?.hash), \(request.newPasswordHash), \(request.requester.ip),
                    \(request.requester.userAgent), \(request.respondingDeviceID), \(request.integrationID), \(prompt))
                """, self.logger)
            return superseded
        }
    }

    public func request(id: String) async throws -> ApprovalRequest? {
        try await rows("SELECT * FROM approval_requests WHERE id = \(id)").first.map(ApprovalRequest.init(row:))
    }

    public func liveRequests() async throws -> [ApprovalRequest] {
        try await rows("SELECT * FROM approval_requests WHERE state IN ('pending', 'approved')").map(ApprovalRequest.init(row:))
    }

    public func pendingRequests(userID: String, now: Date) async throws -> [ApprovalRequest] {
        try await rows(
            """
            SELECT * FROM approval_requests WHERE user_id = \(userID) AND state = 'pending' AND expires_at > \(now.stored)
            ORDER BY created_at DESC
            """
        ).map(ApprovalRequest.init(row:))
    }

    public func dueRequests(now: Date, limit: Int) async throws -> [ApprovalRequest] {
        try await rows(
            """
            SELECT * FROM approval_requests
            WHERE state IN ('pending', 'approved')
                AND ((state = 'pending' AND expires_at <= \(now.stored)) OR (state = 'approved' AND complete_by <= \(now.stored)))
            LIMIT \(limit)
            """
        ).map(ApprovalRequest.init(row:))
    }

    public func liveCounts() async throws -> [ApprovalState: Int] {
        var counts: [ApprovalState: Int] = [:]
        for row in try await rows("SELECT state, COUNT(*)::bigint AS n FROM approval_requests WHERE state IN ('pending', 'approved') GROUP BY state")
        {
            if let state = ApprovalState(rawValue: try row.get("state")) { counts[state] = try row.get("n", as: Int.self) }
        }
        return counts
    }

    public func apply(
        _ transition: Transition, to request: ApprovalRequest, event: OutboxItem?, audit: AuditEvent?,
        writeTime: @escaping @Sendable () -> Date
    ) async throws -> Bool {
        guard let deadline = DeadlineCheck(transition) else { return false }  // terminal states never change
        let setsPassword = transition.setsPassword(of: request)
        return try await transaction { connection in
            // Completing a reset needs the held hash, which the update below clears: read (and lock) it first.
            let held =
                setsPassword
                ? try await connection.rows(
                    "SELECT user_id, new_password_hash FROM approval_requests WHERE id = \(request.id) FOR UPDATE", self.logger
                )
                .first
                : nil
            let changed = try await connection.run(
                """
                UPDATE approval_requests
                SET state = \(transition.to.rawValue), updated_at = \(transition.at.stored), complete_by = \(request.completeBy?.stored),
                    new_password_hash = CASE WHEN \(transition.clearsPasswordHash) THEN NULL ELSE new_password_hash END,
                    responding_device_id = \(request.respondingDeviceID),
                    device_key_bound = \(request.deviceKeyBound), answered_via = \(request.via?.rawValue), version = version + 1
                WHERE id = \(request.id) AND state = \(transition.from.rawValue)
                    AND \(unescaped: deadline.column) \(unescaped: deadline.comparison) \(writeTime().stored)
                RETURNING id
                """, self.logger)
            guard changed == 1 else { return false }
            if let event { try await Self.queueWebhook(event, integrationID: request.integrationID, connection, self.logger) }
            if let audit { try await Self.insert(audit, connection, self.logger) }
            if setsPassword {
                // The held hash becomes the password in the same transaction as the completion.
                guard let held, let userID = try held.get("user_id", as: String?.self),
                    let hash = try held.get("new_password_hash", as: String?.self)
                else {
                    throw PostgresStoreError.corrupt("approved request \(request.logReference) holds no password hash")
                }
                // One recovery at a time: the user's unused email code and link stop working.
                // Email resets before the user: the order an email reset's redemption locks them in.
                try await connection.run(
                    """
                    UPDATE email_resets SET state = 'replaced', finished_at = \(transition.at.stored)
                    WHERE user_id = \(userID) AND state = 'active' RETURNING id
                    """, self.logger)
                try await connection.run("UPDATE users SET password_hash = \(hash) WHERE id = \(userID) RETURNING id", self.logger)
            }
            // Delivered to every node's listener when this transaction commits.
            try await Self.notify(request.id, connection, self.logger)
            return true
        }
    }

    static func notify(_ id: String, _ connection: PostgresConnection, _ logger: Logger) async throws {
        try await connection.run("SELECT pg_notify(\(channel), \(id))", logger)
    }

    /// Queues a webhook event of an integration's approval, only if the
    /// integration has a webhook now (an `INSERT … SELECT`, in the caller's transaction).
    static func queueWebhook(_ event: OutboxItem, integrationID: String?, _ connection: PostgresConnection, _ logger: Logger) async throws {
        guard let integrationID else { return }
        try await connection.run(
            """
            INSERT INTO outbox (id, kind, reference, user_id, payload, state, created_at, next_attempt_at, deadline, attempts)
            SELECT \(event.id), \(event.kind.rawValue), \(event.reference), \(event.userID), \(event.payload), 'pending',
                \(event.createdAt.stored), \(event.nextAttemptAt.stored), \(event.deadline.stored), 0
            WHERE EXISTS (SELECT 1 FROM integrations WHERE id = \(integrationID) AND webhook_url IS NOT NULL)
            RETURNING id
            """, logger)
    }
}

extension ApprovalRequest {
    init(row: PostgresRandomAccessRow) throws {
        let salt = try row.get("number_code_salt", as: String?.self)
        let hash = try row.get("number_code_hash", as: String?.self)
        guard let state = ApprovalState(rawValue: try row.get("state")),
            let action = ApprovalAction(rawValue: try row.get("action"))
        else {
            throw PostgresStoreError.corrupt("approval request row with unknown state or action")
        }
        self.init(
            id: try row.get("id"),
            userID: try row.get("user_id"),
            subject: try row.get("subject"),
            action: action,
            state: state,
            createdAt: try row.date("created_at"),
            expiresAt: try row.date("expires_at"),
            completionWindow: try row.get("completion_window"),
            completeBy: try row.optionalDate("complete_by"),
            updatedAt: try row.date("updated_at"),
            numberCode: salt.flatMap { salt in hash.map { NumberCode.Stored(salt: salt, hash: $0) } },
            newPasswordHash: try row.get("new_password_hash"),
            requester: RequesterInfo(ip: try row.get("requester_ip"), userAgent: try row.get("requester_user_agent")),
            respondingDeviceID: try row.get("responding_device_id"),
            deviceKeyBound: try row.get("device_key_bound"),
            via: try (try row.get("answered_via", as: String?.self)).flatMap(AnswerVia.init(rawValue:)),
            prompt: try (try row.get("prompt", as: String?.self)).map(ApprovalPrompt.init(storedJSON:)),
            version: Int(try row.get("version", as: Int32.self))
        )
    }
}

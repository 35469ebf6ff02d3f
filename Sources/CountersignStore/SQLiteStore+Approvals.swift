import CountersignCore
import Foundation
import GRDB

extension SQLiteStore: ApprovalStore {
    public func insert(
        _ request: ApprovalRequest, idempotency: IdempotencyRecord?, supersededEvent: @escaping @Sendable (ApprovalRequest) -> OutboxItem?
    ) async throws -> [ApprovalRequest] {
        let prompt = try request.prompt?.storedJSON()
        return try await group.write { db in
            let now = request.createdAt.storedValue
            if let idempotency {
                // A key older than its window is free again.
                try db.cachedStatement(sql: "DELETE FROM idempotency_keys WHERE integration_id = ? AND key = ? AND created_at <= ?").execute(
                    arguments: [
                        idempotency.integrationID, idempotency.key, idempotency.createdAt.addingTimeInterval(-IdempotencyRecord.window).storedValue,
                    ])
                if try Bool.fetchOne(
                    db.cachedStatement(sql: "SELECT 1 FROM idempotency_keys WHERE integration_id = ? AND key = ?"),
                    arguments: [idempotency.integrationID, idempotency.key]) != nil
                {
                    throw IdempotencyKeyTaken()
                }
                try db.cachedStatement(
                    sql: """
                        INSERT INTO idempotency_keys (integration_id, key, request_hash, approval_id, answer, created_at)
                        VALUES (?, ?, ?, ?, ?, ?)
                        """
                ).execute(arguments: [
                    idempotency.integrationID, idempotency.key, idempotency.requestHash, idempotency.approvalID, idempotency.answer, now,
                ])
            }
            let superseded = try Row.fetchAll(
                db.cachedStatement(
                    sql: """
                        SELECT * FROM approval_requests
                        WHERE subject = ? AND action = ? AND integration_id IS ? AND state = 'pending' AND expires_at > ?
                        """),
                arguments: [request.subject, request.action.rawValue, request.integrationID, now]
            ).map(ApprovalRequest.init(row:))
            for old in superseded {
                if let event = supersededEvent(old) { try Self.queueWebhook(event, integrationID: old.integrationID, db) }
                // The same change as ApprovalStateMachine.supersede(at:).
                try db.cachedStatement(
                    sql: """
                        UPDATE approval_requests SET state = 'cancelled', updated_at = ?, new_password_hash = NULL, version = version + 1
                        WHERE id = ? AND state = 'pending'
                        """
                ).execute(arguments: [now, old.id]
                )
            }
            try db.cachedStatement(
                sql: """
                    INSERT INTO approval_requests (
                        id, user_id, subject, action, state, created_at, expires_at, completion_window,
                        complete_by, updated_at, number_code_salt, number_code_hash, new_password_hash,
                        requester_ip, requester_user_agent, responding_device_id, integration_id, prompt)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """
            ).execute(arguments: [
                request.id, request.userID, request.subject, request.action.rawValue, request.state.rawValue,
                now, request.expiresAt.storedValue, request.completionWindow,
                request.completeBy?.storedValue, request.updatedAt.storedValue,
                request.numberCode?.salt, request.numberCode?.hash, request.newPasswordHash,
                request.requester.ip, request.requester.userAgent, request.respondingDeviceID, request.integrationID, prompt,
            ]
            )
            return superseded
        }
    }

    public func request(id: String) async throws -> ApprovalRequest? {
        try await pool.read { db in
            try Row.fetchOne(db.cachedStatement(sql: "SELECT * FROM approval_requests WHERE id = ?"), arguments: [id])
                .map(ApprovalRequest.init(row:))
        }
    }

    /// Every live request, read row by row: a start with 100,000 of them never holds 100,000 rows
    /// at once beside the requests made of them (that high-water mark would stay in the process).
    public func liveRequests() async throws -> [ApprovalRequest] {
        try await pool.read { db in
            var requests: [ApprovalRequest] = []
            let rows = try Row.fetchCursor(db.cachedStatement(sql: "SELECT * FROM approval_requests WHERE state IN ('pending', 'approved')"))
            while let row = try rows.next() {
                requests.append(try ApprovalRequest(row: row))
            }
            return requests
        }
    }

    public func pendingRequests(userID: String, now: Date) async throws -> [ApprovalRequest] {
        try await pool.read { db in
            try Row.fetchAll(
                db.cachedStatement(
                    sql: "SELECT * FROM approval_requests WHERE user_id = ? AND state = 'pending' AND expires_at > ? ORDER BY created_at DESC"),
                arguments: [userID, now.storedValue]
            ).map(ApprovalRequest.init(row:))
        }
    }

    public func dueRequests(now: Date, limit: Int) async throws -> [ApprovalRequest] {
        try await pool.read { db in
            try Row.fetchAll(
                db.cachedStatement(
                    sql: """
                        SELECT * FROM approval_requests
                        WHERE (state = 'pending' AND expires_at <= ?) OR (state = 'approved' AND complete_by <= ?) LIMIT ?
                        """),
                arguments: [now.storedValue, now.storedValue, limit]
            ).map(ApprovalRequest.init(row:))
        }
    }

    public func liveCounts() async throws -> [ApprovalState: Int] {
        try await pool.read { db in
            var counts: [ApprovalState: Int] = [:]
            for row in try Row.fetchAll(
                db.cachedStatement(sql: "SELECT state, COUNT(*) AS n FROM approval_requests WHERE state IN ('pending', 'approved') GROUP BY state"))
            {
                if let state = ApprovalState(rawValue: row["state"]) { counts[state] = row["n"] }
            }
            return counts
        }
    }

    /// One process owns the file: the broker keeps its index.
    public var isShared: Bool { false }

    /// Queues a webhook event of an integration's approval, only if the
    /// integration has a webhook now (an `INSERT … SELECT`, in the caller's transaction).
    static func queueWebhook(_ event: OutboxItem, integrationID: String?, _ db: Database) throws {
        guard let integrationID else { return }
        try db.cachedStatement(
            sql: """
                INSERT INTO outbox (id, kind, reference, user_id, payload, state, created_at, next_attempt_at, deadline, attempts)
                SELECT ?, ?, ?, ?, ?, 'pending', ?, ?, ?, 0
                WHERE EXISTS (SELECT 1 FROM integrations WHERE id = ? AND webhook_url IS NOT NULL)
                """
        ).execute(arguments: [
            event.id, event.kind.rawValue, event.reference, event.userID, event.payload, event.createdAt.storedValue,
            event.nextAttemptAt.storedValue, event.deadline.storedValue, integrationID,
        ])
    }

    public func apply(
        _ transition: Transition, to request: ApprovalRequest, event: OutboxItem?, audit: AuditEvent?,
        writeTime: @escaping @Sendable () -> Date
    ) async throws -> Bool {
        guard let deadline = DeadlineCheck(transition) else { return false }  // terminal states never change
        let setsPassword = transition.setsPassword(of: request)
        return try await group.write { db in
            // Completing a reset needs the held hash, which the update below clears: read it first.
            let held =
                setsPassword
                ? try Row.fetchOne(
                    db.cachedStatement(sql: "SELECT user_id, new_password_hash FROM approval_requests WHERE id = ?"), arguments: [request.id])
                : nil
            try db.cachedStatement(
                sql: """
                    UPDATE approval_requests
                    SET state = ?, updated_at = ?, complete_by = ?,
                        new_password_hash = CASE WHEN ? THEN NULL ELSE new_password_hash END, responding_device_id = ?,
                        device_key_bound = ?, answered_via = ?, version = version + 1
                    WHERE id = ? AND state = ? AND \(deadline.column) \(deadline.comparison) ?
                    """
            ).execute(arguments: [
                transition.to.rawValue, transition.at.storedValue, request.completeBy?.storedValue,
                transition.clearsPasswordHash, request.respondingDeviceID, request.deviceKeyBound, request.via?.rawValue,
                request.id, transition.from.rawValue, writeTime().storedValue,
            ]
            )
            guard db.changesCount == 1 else { return false }
            if let event { try Self.queueWebhook(event, integrationID: request.integrationID, db) }
            if let audit { try Self.insert(audit, db) }
            if setsPassword {
                // The held hash becomes the password in the same transaction as the completion.
                guard let userID: String = held?["user_id"], let hash: String = held?["new_password_hash"] else {
                    throw DatabaseError(message: "approved request \(request.logReference) holds no password hash")
                }
                try db.cachedStatement(sql: "UPDATE users SET password_hash = ? WHERE id = ?").execute(arguments: [hash, userID])
                // One recovery at a time: the user's unused email code and link stop working.
                try db.cachedStatement(sql: "UPDATE email_resets SET state = 'replaced', finished_at = ? WHERE user_id = ? AND state = 'active'")
                    .execute(arguments: [transition.at.storedValue, userID])
            }
            return true
        }
    }
}

extension ApprovalRequest {
    init(row: Row) throws {
        let salt: String? = row["number_code_salt"]
        let hash: String? = row["number_code_hash"]
        guard let state = ApprovalState(rawValue: row["state"]),
            let action = ApprovalAction(rawValue: row["action"])
        else {
            throw DatabaseError(message: "approval request row with unknown state or action")
        }
        self.init(
            id: row["id"],
            userID: row["user_id"],
            subject: row["subject"],
            action: action,
            state: state,
            createdAt: Date(stored: row["created_at"]),
            expiresAt: Date(stored: row["expires_at"]),
            completionWindow: row["completion_window"],
            completeBy: (row["complete_by"] as Double?).map(Date.init(stored:)),
            updatedAt: Date(stored: row["updated_at"]),
            numberCode: salt.flatMap { salt in hash.map { NumberCode.Stored(salt: salt, hash: $0) } },
            newPasswordHash: row["new_password_hash"],
            requester: RequesterInfo(ip: row["requester_ip"], userAgent: row["requester_user_agent"]),
            respondingDeviceID: row["responding_device_id"],
            deviceKeyBound: row["device_key_bound"],
            via: (row["answered_via"] as String?).flatMap(AnswerVia.init(rawValue:)),
            prompt: try (row["prompt"] as String?).map(ApprovalPrompt.init(storedJSON:)),
            version: row["version"]
        )
    }
}

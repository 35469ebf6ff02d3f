import CountersignCore
import Foundation
import PostgresNIO

extension PostgresStore: EmailResetStore {
    public func issueEmailReset(_ ticket: EmailResetTicket, mail: OutboxItem?) async throws -> (replaced: Int, droppedMails: [String]) {
        let now = ticket.createdAt.stored
        return try await transaction { connection in
            // Codes for one address take turns: a racing one waits here, then sees this one's ticket active.
            try await Self.serialize("email_reset", ticket.email, connection, self.logger)
            // Earlier unsent mails of the replaced tickets are useless now: they go with them.
            let dropped = try await connection.rows(
                """
                UPDATE outbox SET state = 'dropped', payload = NULL, lease_until = NULL, finished_at = \(now),
                    last_error = 'replaced by a newer code'
                WHERE state = 'pending' AND reference IN (SELECT id FROM email_resets WHERE email = \(ticket.email) AND state = 'active')
                RETURNING id
                """, self.logger
            ).map { try $0.get("id", as: String.self) }
            let replaced = try await connection.run(
                "UPDATE email_resets SET state = 'replaced', finished_at = \(now) WHERE email = \(ticket.email) AND state = 'active' RETURNING id",
                self.logger)
            try await connection.run(
                """
                INSERT INTO email_resets (id, user_id, email, code_hash, token_hash, created_at, expires_at, tries, state)
                VALUES (\(ticket.id), \(ticket.userID), \(ticket.email), \(ticket.codeHash), \(ticket.tokenHash), \(now),
                    \(ticket.expiresAt.stored), 0, 'active')
                """, self.logger)
            if let mail { try await Self.insert(mail, connection, self.logger) }
            return (replaced, dropped)
        }
    }

    public func activeEmailReset(email: String) async throws -> EmailResetTicket? {
        try await rows("SELECT * FROM email_resets WHERE email = \(email) AND state = 'active' ORDER BY created_at DESC LIMIT 1").first
            .map(EmailResetTicket.init(row:))
    }

    public func emailReset(tokenHash: String) async throws -> EmailResetTicket? {
        try await rows("SELECT * FROM email_resets WHERE token_hash = \(tokenHash)").first.map(EmailResetTicket.init(row:))
    }

    public func takeEmailResetTry(id: String, maxTries: Int, now: Date) async throws -> Int? {
        try await rows(
            """
            UPDATE email_resets SET tries = tries + 1
            WHERE id = \(id) AND state = 'active' AND tries < \(maxTries) AND expires_at > \(now.stored)
            RETURNING tries
            """
        ).first.map { Int(try $0.get("tries", as: Int32.self)) }
    }

    public func returnEmailResetTry(id: String) async throws {
        try await rows("UPDATE email_resets SET tries = tries - 1 WHERE id = \(id) AND state = 'active' AND tries > 0 RETURNING id")
    }

    public func redeemEmailReset(id: String, passwordHash: String, now: Date) async throws -> [CancelledReset]? {
        try await transaction { connection in
            // Locks in the order a phone reset's completion takes them (its request, then
            // email resets, then the user), so that the two cannot deadlock.
            if let owner = try await connection.rows("SELECT user_id FROM email_resets WHERE id = \(id)", self.logger).first,
                let userID = try owner.get("user_id", as: String?.self)
            {
                try await connection.run(
                    "SELECT id FROM approval_requests WHERE user_id = \(userID) AND state IN ('pending', 'approved') FOR UPDATE", self.logger)
            }
            let used = try await connection.rows(
                """
                UPDATE email_resets SET state = 'used', finished_at = \(now.stored)
                WHERE id = \(id) AND state = 'active' AND expires_at > \(now.stored) AND user_id IS NOT NULL
                RETURNING user_id
                """, self.logger)
            guard let row = used.first else { return nil }
            let userID = try row.get("user_id", as: String.self)
            guard try await connection.run("UPDATE users SET password_hash = \(passwordHash) WHERE id = \(userID) RETURNING id", self.logger) == 1
            else { return nil }
            // One recovery at a time: a live phone reset must not overwrite this password later.
            return try await Self.cancelLivePhoneResets(userID: userID, now: now, by: "email reset", connection, self.logger)
        }
    }

    /// Cancels the user's live phone resets (``ApprovalStateMachine/cancelForPasswordChange(at:)``
    /// in SQL), audited and notified to every node, in the caller's transaction.
    static func cancelLivePhoneResets(
        userID: String, now: Date, by path: String, _ connection: PostgresConnection, _ logger: Logger
    ) async throws -> [CancelledReset] {
        let live = try await connection.rows(
            """
            SELECT id, state FROM approval_requests
            WHERE user_id = \(userID) AND action = 'password_reset' AND integration_id IS NULL
                AND ((state = 'pending' AND expires_at > \(now.stored)) OR (state = 'approved' AND complete_by > \(now.stored)))
            FOR UPDATE
            """, logger)
        var cancelled: [CancelledReset] = []
        for row in live {
            let request = try row.get("id", as: String.self)
            try await connection.run(
                """
                UPDATE approval_requests SET state = 'cancelled', updated_at = \(now.stored), new_password_hash = NULL, version = version + 1
                WHERE id = \(request) RETURNING id
                """, logger)
            try await Self.insert(CancelledReset.auditEvent(request, userID: userID, at: now, by: path), connection, logger)
            // Every node's long polls of it wake when this commits.
            try await Self.notify(request, connection, logger)
            cancelled.append(CancelledReset(id: request, from: ApprovalState(rawValue: try row.get("state", as: String.self)) ?? .pending))
        }
        return cancelled
    }

    /// Email resets and outbox items that ended (or expired) before `date`.
    /// Each delete is a statement of its own: in one transaction the rows
    /// deleted first would stay locked, against the upserts of requests
    /// (rate counters, idempotency keys), until the last delete ended.
    public func pruneFinishedResets(before date: Date) async throws -> Int {
        let resets = try await rows(
            """
            DELETE FROM email_resets WHERE (state != 'active' AND finished_at < \(date.stored)) OR expires_at < \(date.stored) RETURNING id
            """, bounded: false
        ).count
        let outbox = try await rows("DELETE FROM outbox WHERE state != 'pending' AND finished_at < \(date.stored) RETURNING id", bounded: false).count
        // Rate counters whose window ended a day ago (the longest limit's window is an hour by default).
        let counters = try await rows(
            "DELETE FROM rate_counters WHERE opened < \(Date().addingTimeInterval(-86400).stored) RETURNING key", bounded: false
        ).count
        let records = try await withConnection(bounded: false) { [logger] connection in
            try await Self.pruneIntegrationRecords(now: Date(), connection, logger)
        }
        return resets + outbox + counters + records
    }
}

extension EmailResetTicket {
    init(row: PostgresRandomAccessRow) throws {
        self.init(
            id: try row.get("id"), userID: try row.get("user_id"), email: try row.get("email"), codeHash: try row.get("code_hash"),
            tokenHash: try row.get("token_hash"), createdAt: try row.date("created_at"), expiresAt: try row.date("expires_at"),
            tries: Int(try row.get("tries", as: Int32.self)), state: State(rawValue: try row.get("state")) ?? .replaced)
    }
}

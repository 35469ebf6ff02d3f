import CountersignCore
import Foundation
import GRDB

extension SQLiteStore: EmailResetStore {
    public func issueEmailReset(_ ticket: EmailResetTicket, mail: OutboxItem?) async throws -> (replaced: Int, droppedMails: [String]) {
        try await pool.write { db in
            let now = ticket.createdAt.storedValue
            // Earlier unsent mails of the replaced tickets are useless now: they go with them.
            let dropped = try String.fetchAll(
                db.cachedStatement(
                    sql: """
                        UPDATE outbox SET state = 'dropped', payload = NULL, lease_until = NULL, finished_at = ?,
                            last_error = 'replaced by a newer code'
                        WHERE state = 'pending' AND reference IN (SELECT id FROM email_resets WHERE email = ? AND state = 'active')
                        RETURNING id
                        """),
                arguments: [now, ticket.email])
            try db.cachedStatement(sql: "UPDATE email_resets SET state = 'replaced', finished_at = ? WHERE email = ? AND state = 'active'").execute(
                arguments: [now, ticket.email])
            let replaced = db.changesCount
            try db.cachedStatement(
                sql: """
                    INSERT INTO email_resets (id, user_id, email, code_hash, token_hash, created_at, expires_at, tries, state)
                    VALUES (?, ?, ?, ?, ?, ?, ?, 0, 'active')
                    """
            ).execute(arguments: [
                ticket.id, ticket.userID, ticket.email, ticket.codeHash, ticket.tokenHash, now, ticket.expiresAt.storedValue,
            ])
            if let mail { try Self.insert(mail, db) }
            return (replaced, dropped)
        }
    }

    public func activeEmailReset(email: String) async throws -> EmailResetTicket? {
        try await pool.read { db in
            try Row.fetchOne(
                db.cachedStatement(sql: "SELECT * FROM email_resets WHERE email = ? AND state = 'active' ORDER BY created_at DESC LIMIT 1"),
                arguments: [email]
            ).map(EmailResetTicket.init(row:))
        }
    }

    public func emailReset(tokenHash: String) async throws -> EmailResetTicket? {
        try await pool.read { db in
            try Row.fetchOne(db.cachedStatement(sql: "SELECT * FROM email_resets WHERE token_hash = ?"), arguments: [tokenHash]).map(
                EmailResetTicket.init(row:))
        }
    }

    public func takeEmailResetTry(id: String, maxTries: Int, now: Date) async throws -> Int? {
        try await pool.write { db in
            try Int.fetchOne(
                db.cachedStatement(
                    sql: """
                        UPDATE email_resets SET tries = tries + 1
                        WHERE id = ? AND state = 'active' AND tries < ? AND expires_at > ?
                        RETURNING tries
                        """),
                arguments: [id, maxTries, now.storedValue])
        }
    }

    public func returnEmailResetTry(id: String) async throws {
        try await pool.write { db in
            try db.cachedStatement(sql: "UPDATE email_resets SET tries = tries - 1 WHERE id = ? AND state = 'active' AND tries > 0").execute(
                arguments: [id])
        }
    }

    public func redeemEmailReset(id: String, passwordHash: String, now: Date) async throws -> [CancelledReset]? {
        try await pool.write { db in
            try db.cachedStatement(
                sql: """
                    UPDATE email_resets SET state = 'used', finished_at = ?
                    WHERE id = ? AND state = 'active' AND expires_at > ? AND user_id IS NOT NULL
                    """
            ).execute(arguments: [now.storedValue, id, now.storedValue])
            guard db.changesCount == 1,
                let userID = try String.fetchOne(db.cachedStatement(sql: "SELECT user_id FROM email_resets WHERE id = ?"), arguments: [id])
            else { return nil }
            try db.cachedStatement(sql: "UPDATE users SET password_hash = ? WHERE id = ?").execute(arguments: [passwordHash, userID])
            guard db.changesCount == 1 else { return nil }
            // One recovery at a time: a live phone reset must not overwrite this password later.
            return try Self.cancelLivePhoneResets(userID: userID, now: now, by: "email reset", db)
        }
    }

    /// Cancels the user's live phone resets (``ApprovalStateMachine/cancelForPasswordChange(at:)``
    /// in SQL), audited, in the caller's transaction: the password changed another way.
    static func cancelLivePhoneResets(userID: String, now: Date, by path: String, _ db: Database) throws -> [CancelledReset] {
        let live = try Row.fetchAll(
            db.cachedStatement(
                sql: """
                    SELECT id, state FROM approval_requests
                    WHERE user_id = ? AND action = 'password_reset' AND integration_id IS NULL
                        AND ((state = 'pending' AND expires_at > ?) OR (state = 'approved' AND complete_by > ?))
                    """),
            arguments: [userID, now.storedValue, now.storedValue])
        var cancelled: [CancelledReset] = []
        for row in live {
            let request: String = row["id"]
            try db.cachedStatement(
                sql: """
                    UPDATE approval_requests SET state = 'cancelled', updated_at = ?, new_password_hash = NULL, version = version + 1
                    WHERE id = ?
                    """
            ).execute(arguments: [now.storedValue, request])
            try Self.insert(CancelledReset.auditEvent(request, userID: userID, at: now, by: path), db)
            cancelled.append(CancelledReset(id: request, from: ApprovalState(rawValue: row["state"]) ?? .pending))
        }
        return cancelled
    }

    /// Email resets and outbox items that ended (or expired) before `date`.
    public func pruneFinishedResets(before date: Date) async throws -> Int {
        try await pool.write { db in
            try db.cachedStatement(sql: "DELETE FROM email_resets WHERE (state != 'active' AND finished_at < ?) OR expires_at < ?").execute(
                arguments: [date.storedValue, date.storedValue])
            let resets = db.changesCount
            try db.cachedStatement(sql: "DELETE FROM outbox WHERE state != 'pending' AND finished_at < ?").execute(arguments: [date.storedValue])
            let outbox = db.changesCount
            return resets + outbox + (try Self.pruneIntegrationRecords(now: Date(), db))
        }
    }
}

extension EmailResetTicket {
    init(row: Row) throws {
        self.init(
            id: row["id"],
            userID: row["user_id"],
            email: row["email"],
            codeHash: row["code_hash"],
            tokenHash: row["token_hash"],
            createdAt: Date(stored: row["created_at"]),
            expiresAt: Date(stored: row["expires_at"]),
            tries: row["tries"],
            state: State(rawValue: row["state"]) ?? .replaced
        )
    }
}

import CountersignCore
import Foundation

/// Email resets: the statements both stores run.
public enum EmailResetSQL {
    /// Earlier unsent mails of the address's active tickets are useless once a new code is issued (column `id`: the dropped mails).
    public static func dropMails(email: String, at now: Date) -> SQLStatement {
        """
        UPDATE outbox SET state = 'dropped', payload = NULL, lease_until = NULL, finished_at = \(now),
            last_error = 'replaced by a newer code'
        WHERE state = 'pending' AND reference IN (SELECT id FROM email_resets WHERE email = \(email) AND state = 'active')
        RETURNING id
        """
    }

    public static func replaceActive(email: String, at now: Date) -> SQLStatement {
        "UPDATE email_resets SET state = 'replaced', finished_at = \(now) WHERE email = \(email) AND state = 'active' RETURNING id"
    }

    public static func insert(_ ticket: EmailResetTicket) -> SQLStatement {
        """
        INSERT INTO email_resets (id, user_id, email, code_hash, token_hash, created_at, expires_at, tries, state)
        VALUES (\(ticket.id), \(ticket.userID), \(ticket.email), \(ticket.codeHash), \(ticket.tokenHash), \(ticket.createdAt),
            \(ticket.expiresAt), 0, 'active')
        """
    }

    public static func active(email: String) -> SQLStatement {
        "SELECT * FROM email_resets WHERE email = \(email) AND state = 'active' ORDER BY created_at DESC LIMIT 1"
    }

    public static func reset(tokenHash: String) -> SQLStatement { "SELECT * FROM email_resets WHERE token_hash = \(tokenHash)" }

    /// Takes one try of the code, if any is left and it is still active (column `tries`: the tries taken, this one included).
    public static func takeTry(id: String, maxTries: Int, now: Date) -> SQLStatement {
        """
        UPDATE email_resets SET tries = tries + 1
        WHERE id = \(id) AND state = 'active' AND tries < \(maxTries) AND expires_at > \(now)
        RETURNING tries
        """
    }

    public static func returnTry(id: String) -> SQLStatement {
        "UPDATE email_resets SET tries = tries - 1 WHERE id = \(id) AND state = 'active' AND tries > 0 RETURNING id"
    }

    public static func owner(id: String) -> SQLStatement { "SELECT user_id FROM email_resets WHERE id = \(id)" }

    /// Uses the ticket, if it is active, unexpired and of a user (column `user_id`).
    public static func redeem(id: String, now: Date) -> SQLStatement {
        """
        UPDATE email_resets SET state = 'used', finished_at = \(now)
        WHERE id = \(id) AND state = 'active' AND expires_at > \(now) AND user_id IS NOT NULL
        RETURNING user_id
        """
    }

    /// The user's phone resets that may still be live (the state machine decides which are).
    public static func livePhoneResets(userID: String) -> SQLStatement {
        """
        SELECT * FROM approval_requests
        WHERE user_id = \(userID) AND action = 'password_reset' AND integration_id IS NULL AND state IN ('pending', 'approved')
        """
    }

    /// Upkeep: email resets that ended (or expired) before `date`, then finished outbox items.
    public static func prune(before date: Date) -> [SQLStatement] {
        [
            "DELETE FROM email_resets WHERE (state != 'active' AND finished_at < \(date)) OR expires_at < \(date) RETURNING id",
            "DELETE FROM outbox WHERE state != 'pending' AND finished_at < \(date) RETURNING id",
        ]
    }
}

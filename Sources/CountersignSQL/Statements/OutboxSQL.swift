import CountersignCore
import Foundation

/// The outbox: the statements both stores run. Claiming stays each store's own: SQLite's single
/// writer claims what it reads, PostgreSQL's nodes claim with `FOR UPDATE SKIP LOCKED` and a lease owner.
public enum OutboxSQL {
    public static func insert(_ item: OutboxItem) -> SQLStatement {
        """
        INSERT INTO outbox (id, kind, reference, user_id, payload, state, created_at, next_attempt_at, deadline, attempts, integration_id)
        VALUES (\(item.id), \(item.kind.rawValue), \(item.reference), \(item.userID), \(item.payload), 'pending', \(item.createdAt),
            \(item.nextAttemptAt), \(item.deadline), \(item.attempts), \(item.integrationID))
        """
    }

    public static func reschedule(id: String, at date: Date, error: String, _ dialect: SQLDialect) -> SQLStatement {
        """
        UPDATE outbox SET next_attempt_at = \(date), \(unsafe: dialect.clearLease), last_error = \(error)
        WHERE id = \(id) AND state = 'pending' RETURNING id
        """
    }

    /// Ends an item; a mail's payload (it holds a reset link) goes with it, and so does the payload of
    /// an event about a user erased meanwhile (it names them; an erasure leaves only what is on its way).
    public static func finish(id: String, as end: OutboxEnd, detail: String, at date: Date, _ dialect: SQLDialect) -> SQLStatement {
        """
        UPDATE outbox SET state = \(end.rawValue),
            payload = CASE WHEN kind = 'mail' OR (user_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM users u WHERE u.id = outbox.user_id))
                THEN NULL ELSE payload END,
            \(unsafe: dialect.clearLease), last_error = \(end == .delivered ? nil : detail), finished_at = \(date)
        WHERE id = \(id) AND state = 'pending' RETURNING id
        """
    }

    /// Columns `kind` and `n`.
    public static let depth: SQLStatement = "SELECT kind, COUNT(*) AS n FROM outbox WHERE state = 'pending' GROUP BY kind"
}

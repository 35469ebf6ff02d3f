import CountersignCore
import Foundation

/// The audit trail and the upkeep of finished requests: the statements both stores run.
public enum AuditSQL {
    public static func insert(_ event: AuditEvent) -> SQLStatement { insert(CollectionOfOne(event)) }

    /// Rows one INSERT of a batch takes at most: 11 values each, far below either database's
    /// limit on bound values (SQLite 32,766, PostgreSQL 65,535).
    public static let rowsPerInsert = 64

    /// The statements that insert `events` in order, ``rowsPerInsert`` rows each: the audit
    /// writer's batches. Row by row, each event of a push cost a statement of its own, and on
    /// PostgreSQL a round trip: the writer fell behind a push load there.
    public static func inserts(_ events: [AuditEvent]) -> [SQLStatement] {
        stride(from: 0, to: events.count, by: rowsPerInsert).map { start in
            insert(events[start..<min(start + rowsPerInsert, events.count)])
        }
    }

    /// One statement that inserts `events` (at least one), in order.
    public static func insert(_ events: some Collection<AuditEvent>) -> SQLStatement {
        precondition(!events.isEmpty, "an INSERT needs a row")
        var statement: SQLStatement =
            "INSERT INTO audit_events (at, kind, user_id, email, device_id, request_ref, ip, user_agent, detail, proof, proof_key) VALUES "
        for (index, event) in events.enumerated() {
            if index > 0 { statement.append(", ") }
            statement.append(
                """
                (\(event.at), \(event.kind.rawValue), \(event.userID), \(event.email), \(event.deviceID), \(event.requestRef), \
                \(event.ip), \(event.userAgent), \(event.detail), \(event.proof), \(event.proofKey))
                """)
        }
        return statement
    }

    /// The latest `limit` events that match, oldest first. A filter left `nil` matches all. Events name
    /// the user by id once known, by the typed email before: `email` matches either.
    public static func events(since: Date?, email: String?, kind: AuditKind?, limit: Int) -> SQLStatement {
        let email = email.map(User.normalize(email:))
        return """
            SELECT * FROM (
                SELECT a.*, u.email AS user_email FROM audit_events a LEFT JOIN users u ON u.id = a.user_id
                WHERE (CAST(\(since) AS DOUBLE PRECISION) IS NULL OR a.at >= \(since))
                    AND (CAST(\(email) AS TEXT) IS NULL OR a.email = \(email) OR a.user_id = (SELECT id FROM users WHERE email = \(email)))
                    AND (CAST(\(kind?.rawValue) AS TEXT) IS NULL OR a.kind = \(kind?.rawValue))
                ORDER BY a.id DESC LIMIT \(limit)
            ) AS latest ORDER BY at, id
            """
    }

    public static func events(requestRef: String) -> SQLStatement {
        """
        SELECT a.*, u.email AS user_email FROM audit_events a LEFT JOIN users u ON u.id = a.user_id
        WHERE a.request_ref = \(requestRef) ORDER BY a.at, a.id LIMIT 1000
        """
    }

    public static func prune(before date: Date) -> SQLStatement { "DELETE FROM audit_events WHERE at < \(date) RETURNING id" }

    /// Terminal approval requests last changed before `date`.
    public static func pruneFinishedRequests(before date: Date) -> SQLStatement {
        "DELETE FROM approval_requests WHERE state NOT IN ('pending', 'approved') AND updated_at < \(date) RETURNING id"
    }
}

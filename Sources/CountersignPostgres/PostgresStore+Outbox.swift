import CountersignCore
import Foundation
import PostgresNIO

extension PostgresStore: OutboxStore {
    static func insert(_ item: OutboxItem, _ connection: PostgresConnection, _ logger: Logger) async throws {
        try await connection.run(
            """
            INSERT INTO outbox (id, kind, reference, user_id, payload, state, created_at, next_attempt_at, deadline, attempts)
            VALUES (\(item.id), \(item.kind.rawValue), \(item.reference), \(item.userID), \(item.payload), 'pending', \(item.createdAt.stored),
                \(item.nextAttemptAt.stored), \(item.deadline.stored), \(item.attempts))
            """, logger)
    }

    /// Claims due items with a lease held by this node. `SKIP LOCKED`: nodes
    /// claiming at once take different rows; an item whose lease ran out (its
    /// node died mid-send) is due again. Only kinds this version delivers are
    /// claimed, and a webhook event waits for the earlier events of its approval.
    public func claimOutbox(now: Date, lease: TimeInterval, limit: Int) async throws -> [OutboxItem] {
        let kinds = OutboxKind.allCases.map(\.rawValue)
        return try await rows(
            """
            UPDATE outbox SET lease_until = \(now.addingTimeInterval(lease).stored), lease_owner = \(nodeID), attempts = attempts + 1
            WHERE id IN (
                SELECT id FROM outbox AS o
                WHERE state = 'pending' AND next_attempt_at <= \(now.stored) AND (lease_until IS NULL OR lease_until < \(now.stored))
                    AND kind = ANY(\(kinds))
                    AND (kind <> 'webhook' OR NOT EXISTS (
                        SELECT 1 FROM outbox AS earlier
                        WHERE earlier.reference = o.reference AND earlier.state = 'pending' AND earlier.seq < o.seq))
                ORDER BY next_attempt_at LIMIT \(limit)
                FOR UPDATE SKIP LOCKED)
            RETURNING *
            """
        ).compactMap(OutboxItem.init(row:))
    }

    public func rescheduleOutbox(id: String, at date: Date, error: String) async throws -> Bool {
        try await rows(
            """
            UPDATE outbox SET next_attempt_at = \(date.stored), lease_until = NULL, lease_owner = NULL, last_error = \(error)
            WHERE id = \(id) AND state = 'pending' RETURNING id
            """
        ).count == 1
    }

    public func finishOutbox(id: String, as end: OutboxEnd, detail: String, at date: Date) async throws -> Bool {
        try await rows(
            """
            UPDATE outbox SET state = \(end.rawValue), payload = CASE WHEN kind = 'mail' THEN NULL ELSE payload END,
                lease_until = NULL, lease_owner = NULL, last_error = \(end == .delivered ? nil : detail), finished_at = \(date.stored)
            WHERE id = \(id) AND state = 'pending' RETURNING id
            """
        ).count == 1
    }

    /// Releases the leases this node held before a restart (by its node id);
    /// other nodes' leases stay theirs.
    public func releaseOutboxLeases() async throws {
        try await rows(
            "UPDATE outbox SET lease_until = NULL, lease_owner = NULL WHERE state = 'pending' AND lease_owner = \(nodeID) RETURNING id")
    }

    public func outboxDepth() async throws -> [OutboxKind: Int] {
        var depth: [OutboxKind: Int] = [:]
        for row in try await rows("SELECT kind, COUNT(*)::bigint AS n FROM outbox WHERE state = 'pending' GROUP BY kind") {
            if let kind = OutboxKind(rawValue: try row.get("kind")) { depth[kind] = try row.get("n", as: Int.self) }
        }
        return depth
    }
}

extension OutboxItem {
    /// `nil` for a kind this version does not know (written by a newer one).
    init?(row: PostgresRandomAccessRow) throws {
        guard let kind = OutboxKind(rawValue: try row.get("kind")), let payload = try row.get("payload", as: Data?.self) else { return nil }
        self.init(
            id: try row.get("id"), kind: kind, reference: try row.get("reference"), userID: try row.get("user_id"), payload: payload,
            createdAt: try row.date("created_at"), nextAttemptAt: try row.date("next_attempt_at"), deadline: try row.date("deadline"),
            attempts: Int(try row.get("attempts", as: Int32.self)))
    }
}

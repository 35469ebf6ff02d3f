import CountersignCore
import CountersignSQL
import Foundation
import PostgresNIO

extension PostgresStore: OutboxStore {
    static func insert(_ item: OutboxItem, _ connection: PostgresConnection, _ logger: Logger) async throws {
        try await connection.perform(OutboxSQL.insert(item), logger)
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
        try await fetch(OutboxSQL.reschedule(id: id, at: date, error: error, .postgres)).count == 1
    }

    public func finishOutbox(id: String, as end: OutboxEnd, detail: String, at date: Date) async throws -> Bool {
        try await fetch(OutboxSQL.finish(id: id, as: end, detail: detail, at: date, .postgres)).count == 1
    }

    /// Releases the leases this node held before a restart (by its node id);
    /// other nodes' leases stay theirs.
    public func releaseOutboxLeases() async throws {
        try await rows(
            "UPDATE outbox SET lease_until = NULL, lease_owner = NULL WHERE state = 'pending' AND lease_owner = \(nodeID) RETURNING id")
    }

    public func outboxDepth() async throws -> [OutboxKind: Int] {
        try counts(try await fetch(OutboxSQL.depth), by: "kind")
    }
}

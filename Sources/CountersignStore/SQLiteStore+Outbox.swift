import CountersignCore
import CountersignSQL
import Foundation
import GRDB

extension SQLiteStore: OutboxStore {
    /// Due rows of the kinds this version can deliver (a JSON array: rows of a
    /// kind a newer version wrote are left to it instead of blocking the queue).
    /// A webhook event waits for the earlier events of its approval: in order per approval.
    static let dueCondition = """
        WHERE state = 'pending' AND next_attempt_at <= ? AND (lease_until IS NULL OR lease_until < ?)
            AND kind IN (SELECT value FROM json_each(?))
            AND (kind <> 'webhook' OR NOT EXISTS (
                SELECT 1 FROM outbox AS earlier
                WHERE earlier.reference = outbox.reference AND earlier.state = 'pending' AND earlier.rowid < outbox.rowid))
        """
    static let knownKinds = "[" + OutboxKind.allCases.map { "\"\($0.rawValue)\"" }.joined(separator: ",") + "]"

    static func insert(_ item: OutboxItem, _ db: Database) throws {
        try db.perform(OutboxSQL.insert(item))
    }

    public func claimOutbox(now: Date, lease: TimeInterval, limit: Int) async throws -> [OutboxItem] {
        // Most rounds find nothing due: look first without taking the write lock.
        let due = try await pool.read { db in
            try Bool.fetchOne(
                db.cachedStatement(sql: "SELECT 1 FROM outbox \(Self.dueCondition) LIMIT 1"),
                arguments: [now.storedValue, now.storedValue, Self.knownKinds])
                ?? false
        }
        guard due else { return [] }
        return try await pool.write { db in
            let statement = try db.cachedStatement(sql: "SELECT * FROM outbox \(Self.dueCondition) ORDER BY next_attempt_at LIMIT ?")
            let rows = try db.rows(of: statement, arguments: [now.storedValue, now.storedValue, Self.knownKinds, limit])
            var items: [OutboxItem] = []
            for row in rows {
                guard var item = try OutboxItem(row: row) else { continue }
                item.attempts += 1
                try db.cachedStatement(sql: "UPDATE outbox SET lease_until = ?, attempts = ? WHERE id = ?").execute(arguments: [
                    now.addingTimeInterval(lease).storedValue, item.attempts, item.id,
                ])
                items.append(item)
            }
            return items
        }
    }

    public func rescheduleOutbox(id: String, at date: Date, error: String) async throws -> Bool {
        try await pool.write { db in try db.perform(OutboxSQL.reschedule(id: id, at: date, error: error, .sqlite)) == 1 }
    }

    public func finishOutbox(id: String, as end: OutboxEnd, detail: String, at date: Date) async throws -> Bool {
        try await pool.write { db in try db.perform(OutboxSQL.finish(id: id, as: end, detail: detail, at: date, .sqlite)) == 1 }
    }

    public func releaseOutboxLeases() async throws {
        try await pool.write { db in
            try db.cachedStatement(sql: "UPDATE outbox SET lease_until = NULL WHERE state = 'pending' AND lease_until IS NOT NULL").execute()
        }
    }

    public func outboxDepth() async throws -> [OutboxKind: Int] {
        try await pool.read { db in try counts(db.fetch(OutboxSQL.depth), by: "kind") }
    }
}

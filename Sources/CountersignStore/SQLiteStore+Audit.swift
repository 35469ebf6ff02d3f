import CountersignCore
import Foundation
import GRDB

extension SQLiteStore: AuditStore {
    public func append(_ events: [AuditEvent]) async throws {
        guard !events.isEmpty else { return }
        try await pool.write { db in
            for event in events { try Self.insert(event, db) }
        }
    }

    static func insert(_ event: AuditEvent, _ db: Database) throws {
        try db.cachedStatement(
            sql: """
                INSERT INTO audit_events (at, kind, user_id, email, device_id, request_ref, ip, user_agent, detail, proof, proof_key)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """
        ).execute(arguments: [
            event.at.storedValue, event.kind.rawValue, event.userID, event.email, event.deviceID,
            event.requestRef, event.ip, event.userAgent, event.detail, event.proof, event.proofKey,
        ]
        )
    }

    public func auditEvents(since: Date?, email: String?, kind: AuditKind?, limit: Int) async throws -> [AuditEvent] {
        try await pool.read { db in
            var conditions: [String] = []
            var arguments: StatementArguments = []
            if let since {
                conditions.append("a.at >= ?")
                arguments += [since.storedValue]
            }
            if let email {
                // Events name the user by id once known, by the typed email before.
                conditions.append("(a.email = ? OR a.user_id = (SELECT id FROM users WHERE email = ?))")
                let normalized = User.normalize(email: email)
                arguments += [normalized, normalized]
            }
            if let kind {
                conditions.append("a.kind = ?")
                arguments += [kind.rawValue]
            }
            let filter = conditions.isEmpty ? "" : "WHERE " + conditions.joined(separator: " AND ")
            let rows = try Row.fetchAll(
                db.cachedStatement(
                    sql: """
                        SELECT * FROM (
                            SELECT a.*, u.email AS user_email FROM audit_events a LEFT JOIN users u ON u.id = a.user_id
                            \(filter) ORDER BY a.id DESC LIMIT ?
                        ) ORDER BY at, id
                        """),
                arguments: arguments + [limit]
            )
            return rows.compactMap(AuditEvent.init(row:))
        }
    }

    public func auditEvents(requestRef: String) async throws -> [AuditEvent] {
        try await pool.read { db in
            try Row.fetchAll(
                db.cachedStatement(
                    sql: """
                        SELECT a.*, u.email AS user_email FROM audit_events a LEFT JOIN users u ON u.id = a.user_id
                        WHERE a.request_ref = ? ORDER BY a.at, a.id LIMIT 1000
                        """),
                arguments: [requestRef]
            ).compactMap(AuditEvent.init(row:))
        }
    }

    public func pruneAudit(before date: Date) async throws -> Int {
        try await pool.write { db in
            try db.cachedStatement(sql: "DELETE FROM audit_events WHERE at < ?").execute(arguments: [date.storedValue])
            return db.changesCount
        }
    }

    /// Removes terminal approval requests last changed before `date`; returns how many.
    public func pruneFinishedRequests(before date: Date) async throws -> Int {
        try await pool.write { db in
            try db.cachedStatement(sql: "DELETE FROM approval_requests WHERE state NOT IN ('pending', 'approved') AND updated_at < ?").execute(
                arguments: [date.storedValue]
            )
            return db.changesCount
        }
    }
}

extension AuditEvent {
    /// `nil` for a kind this version does not know (written by a newer one).
    init?(row: Row) {
        guard let kind = AuditKind(rawValue: row["kind"]) else { return nil }
        self.init(
            at: Date(stored: row["at"]), kind: kind, userID: row["user_id"], email: row["email"] ?? row["user_email"],
            deviceID: row["device_id"], requestRef: row["request_ref"], detail: row["detail"], proof: row["proof"],
            proofKey: row["proof_key"])
        ip = row["ip"]
        userAgent = row["user_agent"]
    }
}

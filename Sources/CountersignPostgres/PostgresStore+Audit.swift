import CountersignCore
import Foundation
import PostgresNIO

extension PostgresStore: AuditStore {
    public func append(_ events: [AuditEvent]) async throws {
        guard !events.isEmpty else { return }
        try await transaction { connection in
            for event in events { try await Self.insert(event, connection, self.logger) }
        }
    }

    static func insert(_ event: AuditEvent, _ connection: PostgresConnection, _ logger: Logger) async throws {
        try await connection.run(
            """
            INSERT INTO audit_events (at, kind, user_id, email, device_id, request_ref, ip, user_agent, detail, proof, proof_key)
            VALUES (\(event.at.stored), \(event.kind.rawValue), \(event.userID), \(event.email), \(event.deviceID), \(event.requestRef),
                \(event.ip), \(event.userAgent), \(event.detail), \(event.proof), \(event.proofKey))
            """, logger)
    }

    /// The operator's reads (`countersign audit`) run without the query limit: on a
    /// long trail they may scan it, and nothing waits on them but the operator.
    public func auditEvents(since: Date?, email: String?, kind: AuditKind?, limit: Int) async throws -> [AuditEvent] {
        // Events name the user by id once known, by the typed email before. NULL filters match all.
        let normalized = email.map(User.normalize(email:))
        return try await rows(
            """
            SELECT * FROM (
                SELECT a.*, u.email AS user_email FROM audit_events a LEFT JOIN users u ON u.id = a.user_id
                WHERE (\(since?.stored)::double precision IS NULL OR a.at >= \(since?.stored))
                    AND (\(normalized)::text IS NULL OR a.email = \(normalized) OR a.user_id = (SELECT id FROM users WHERE email = \(normalized)))
                    AND (\(kind?.rawValue)::text IS NULL OR a.kind = \(kind?.rawValue))
                ORDER BY a.id DESC LIMIT \(limit)
            ) AS latest ORDER BY at, id
            """, bounded: false
        ).compactMap(AuditEvent.init(row:))
    }

    public func auditEvents(requestRef: String) async throws -> [AuditEvent] {
        try await rows(
            """
            SELECT a.*, u.email AS user_email FROM audit_events a LEFT JOIN users u ON u.id = a.user_id
            WHERE a.request_ref = \(requestRef) ORDER BY a.at, a.id LIMIT 1000
            """, bounded: false
        ).compactMap(AuditEvent.init(row:))
    }

    public func pruneAudit(before date: Date) async throws -> Int {
        try await rows("DELETE FROM audit_events WHERE at < \(date.stored) RETURNING id", bounded: false).count
    }

    /// Removes terminal approval requests last changed before `date`; returns how many.
    public func pruneFinishedRequests(before date: Date) async throws -> Int {
        try await rows(
            "DELETE FROM approval_requests WHERE state NOT IN ('pending', 'approved') AND updated_at < \(date.stored) RETURNING id", bounded: false
        )
        .count
    }
}

extension PostgresStore: StoreMaintenance {}

extension AuditEvent {
    /// `nil` for a kind this version does not know (written by a newer one).
    init?(row: PostgresRandomAccessRow) throws {
        guard let kind = AuditKind(rawValue: try row.get("kind")) else { return nil }
        self.init(
            at: try row.date("at"), kind: kind, userID: try row.get("user_id"),
            email: try row.get("email", as: String?.self) ?? row.get("user_email", as: String?.self), deviceID: try row.get("device_id"),
            requestRef: try row.get("request_ref"), detail: try row.get("detail"), proof: try row.get("proof"), proofKey: try row.get("proof_key"))
        ip = try row.get("ip")
        userAgent = try row.get("user_agent")
    }
}

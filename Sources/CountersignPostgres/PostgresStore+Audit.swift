import CountersignCore
import CountersignSQL
import Foundation
import PostgresNIO

extension PostgresStore: AuditStore {
    public func append(_ events: [AuditEvent]) async throws {
        guard !events.isEmpty else { return }
        try await transaction { connection in
            for statement in AuditSQL.inserts(events) { try await connection.perform(statement, self.logger) }
        }
    }

    static func insert(_ event: AuditEvent, _ connection: PostgresConnection, _ logger: Logger) async throws {
        try await connection.perform(AuditSQL.insert(event), logger)
    }

    /// The operator's reads (`countersign audit`) run without the query limit: on a
    /// long trail they may scan it, and nothing waits on them but the operator.
    public func auditEvents(since: Date?, email: String?, kind: AuditKind?, limit: Int) async throws -> [AuditEvent] {
        try await rows(PostgresQuery(AuditSQL.events(since: since, email: email, kind: kind, limit: limit)), bounded: false)
            .compactMap(AuditEvent.init(row:))
    }

    public func auditEvents(requestRef: String) async throws -> [AuditEvent] {
        try await rows(PostgresQuery(AuditSQL.events(requestRef: requestRef)), bounded: false).compactMap(AuditEvent.init(row:))
    }

    public func pruneAudit(before date: Date) async throws -> Int {
        try await rows(PostgresQuery(AuditSQL.prune(before: date)), bounded: false).count
    }

    /// Removes terminal approval requests last changed before `date`; returns how many.
    public func pruneFinishedRequests(before date: Date) async throws -> Int {
        try await rows(PostgresQuery(AuditSQL.pruneFinishedRequests(before: date)), bounded: false).count
    }
}

extension PostgresStore: StoreMaintenance {}

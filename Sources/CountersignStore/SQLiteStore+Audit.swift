import CountersignCore
import CountersignSQL
import Foundation
import GRDB

extension SQLiteStore: AuditStore {
    /// In the group commit: the events share a transaction, and its sync, with the creates
    /// and transitions waiting beside them, instead of taking the writer for one of their own.
    /// At most ``auditEventsPerWrite`` per job, so that a backlog (the log holds up to 100,000
    /// after the database was away) neither makes one batch long nor shares one failure with
    /// many creates.
    public func append(_ events: [AuditEvent]) async throws {
        for start in stride(from: 0, to: events.count, by: Self.auditEventsPerWrite) {
            // Written out before the writer takes them: the writer is the one thread every write waits for.
            let statements = AuditSQL.inserts(Array(events[start..<min(start + Self.auditEventsPerWrite, events.count)]))
            try await group.write { db in
                for statement in statements { try db.perform(statement) }
            }
        }
    }

    public static let auditEventsPerWrite = 512

    static func insert(_ event: AuditEvent, _ db: Database) throws {
        try db.perform(AuditSQL.insert(event))
    }

    public func auditEvents(since: Date?, email: String?, kind: AuditKind?, limit: Int) async throws -> [AuditEvent] {
        try await pool.read { db in
            try db.fetch(AuditSQL.events(since: since, email: email, kind: kind, limit: limit)).compactMap(AuditEvent.init(row:))
        }
    }

    public func auditEvents(requestRef: String) async throws -> [AuditEvent] {
        try await pool.read { db in try db.fetch(AuditSQL.events(requestRef: requestRef)).compactMap(AuditEvent.init(row:)) }
    }

    public func pruneAudit(before date: Date) async throws -> Int {
        try await pool.write { db in try db.perform(AuditSQL.prune(before: date)) }
    }

    /// Removes terminal approval requests last changed before `date`; returns how many.
    public func pruneFinishedRequests(before date: Date) async throws -> Int {
        try await pool.write { db in try db.perform(AuditSQL.pruneFinishedRequests(before: date)) }
    }
}

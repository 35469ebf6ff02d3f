import Foundation

/// Durable home of the audit trail.
public protocol AuditStore: Sendable {
    func append(_ events: [AuditEvent]) async throws
    /// Events, oldest first, filtered.
    func auditEvents(since: Date?, email: String?, kind: AuditKind?, limit: Int) async throws -> [AuditEvent]
    /// The events of one request (by its log reference), oldest first.
    func auditEvents(requestRef: String) async throws -> [AuditEvent]
    /// Removes events older than `date`; returns how many.
    func pruneAudit(before date: Date) async throws -> Int
}

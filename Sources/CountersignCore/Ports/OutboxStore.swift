import Foundation
import Logging

/// The outbox table: what must leave the process, first as a row.
public protocol OutboxStore: Sendable {
    /// Leases up to `limit` due items (pending, next attempt reached, no live
    /// lease) for `lease` seconds and counts one attempt on each.
    func claimOutbox(now: Date, lease: TimeInterval, limit: Int) async throws -> [OutboxItem]
    /// Ends a failed attempt: the item is due again at `date`. `false` when it
    /// was no longer pending (a newer code dropped it meanwhile).
    func rescheduleOutbox(id: String, at date: Date, error: String) async throws -> Bool
    /// Ends the item's life; its payload is erased. `false` when it was no longer pending.
    func finishOutbox(id: String, as end: OutboxEnd, detail: String, at date: Date) async throws -> Bool
    /// Frees the leases a stopped process held (a single node owns every lease at start).
    func releaseOutboxLeases() async throws
    /// Items still waiting to go, by kind.
    func outboxDepth() async throws -> [OutboxKind: Int]
}

/// Delivers the items of one kind.
public protocol OutboxDeliverer: Sendable {
    func deliver(_ item: OutboxItem, logger: Logger) async -> DeliveryResult
    /// Whom an item concerns, for an audit event whose detail does not say
    /// (a webhook event: "integration NAME"); `nil` when nothing is to add.
    func auditSubject(of item: OutboxItem) async -> String?
}

extension OutboxDeliverer {
    public func auditSubject(of item: OutboxItem) async -> String? { nil }
}

import CountersignCore
import Foundation
import Logging
import ServiceLifecycle

/// Delivers the outbox: claims due rows (a lease, so that a row is sent by
/// one sender at a time), hands each to the deliverer of its kind, and ends
/// or reschedules it by what the receiver said. Delivery is at least once: a
/// process killed between the receiver's acceptance and the row's update
/// sends that row again after restart.
///
/// Wakes when the bell rings (something was queued) and once per
/// `pollInterval` for rows whose next attempt has come.
public struct OutboxService: Service, CustomStringConvertible {
    let store: any OutboxStore
    let deliverers: [OutboxKind: any OutboxDeliverer]
    let bell: OutboxBell
    let audit: AuditLog
    let metrics: AppMetrics
    let logger: Logger
    /// The daemon's clock, which the codes' deadlines are written in (a test moves it by hand).
    let now: @Sendable () -> Date
    var pollInterval: Duration = .seconds(1)
    /// How long a claimed row is ours; past it another sender may take it.
    var lease: TimeInterval = 120
    /// Rows claimed and sent at once.
    var batch = 8
    var retry = RetryPolicy()

    public init(
        store: any OutboxStore, deliverers: [OutboxKind: any OutboxDeliverer], bell: OutboxBell, audit: AuditLog, metrics: AppMetrics,
        logger: Logger, now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.now = now
        self.store = store
        self.deliverers = deliverers
        self.bell = bell
        self.audit = audit
        self.metrics = metrics
        self.logger = logger
    }

    /// Exponential back-off with jitter: attempt n waits `base · 2^(n-1)`
    /// seconds, at most `cap`, times a random factor from 0.5 to 1.
    struct RetryPolicy: Sendable {
        var base: TimeInterval = 1
        var cap: TimeInterval = 300

        func delay(afterAttempt attempt: Int) -> TimeInterval {
            let exponential = min(cap, base * pow(2, Double(max(0, attempt - 1))))
            return exponential * Double.random(in: 0.5...1)
        }

        /// When to try again after a failed attempt: after the back-off, or, when
        /// that would pass the deadline, one last time a second before it (a mail
        /// is worth sending while its code is good); `nil` once that second has come.
        func nextAttempt(afterAttempt attempt: Int, now: Date, deadline: Date) -> Date? {
            let lastChance = deadline.addingTimeInterval(-1)
            guard now < lastChance else { return nil }
            return min(now.addingTimeInterval(delay(afterAttempt: attempt)), lastChance)
        }
    }

    /// What service-lifecycle logs at start: the kinds, not the deliverers' innards (keys, templates).
    public var description: String { "OutboxService(\(deliverers.keys.map(\.rawValue).sorted().joined(separator: ", ")))" }

    public func run() async throws {
        // One node owns every lease at start: whatever a killed process held is due again.
        do {
            try await store.releaseOutboxLeases()
        } catch {
            logger.error("cannot release outbox leases; they run out by themselves", metadata: ["error": "\(error)"])
        }
        let bell = bell
        let interval = pollInterval
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                while !Task.isCancelled {
                    bell.ring()
                    try? await Task.sleep(for: interval)
                }
            }
            for await _ in bell.rings.cancelOnGracefulShutdown() {
                await deliverDue()
            }
            group.cancelAll()
        }
    }

    /// Sends every row that is due now, a batch at a time.
    func deliverDue() async {
        while true {
            let items: [OutboxItem]
            do {
                items = try await store.claimOutbox(now: now(), lease: lease, limit: batch)
            } catch {
                logger.error("cannot read the outbox", metadata: ["error": "\(error)"])
                return
            }
            await withTaskGroup(of: Void.self) { group in
                for item in items {
                    group.addTask { await deliver(item) }
                }
            }
            if items.count < batch { return }
        }
    }

    func deliver(_ item: OutboxItem) async {
        var logger = logger
        logger[metadataKey: "outbox"] = "\(item.id)"
        logger[metadataKey: "kind"] = "\(item.kind.rawValue)"
        guard now() < item.deadline else {
            await end(item, .dropped, "its deadline passed before delivery", logger: logger)
            return
        }
        guard let deliverer = deliverers[item.kind] else {
            await end(item, .dropped, "no \(item.kind.rawValue) sender is configured", logger: logger)
            return
        }
        switch await deliverer.deliver(item, logger: logger) {
        case .delivered(let reply):
            await end(item, .delivered, reply, logger: logger)
        case .failed(let reason):
            await end(item, .failed, reason, logger: logger)
        case .retry(let reason):
            guard let next = retry.nextAttempt(afterAttempt: item.attempts, now: now(), deadline: item.deadline) else {
                await end(item, .dropped, "still failing at its deadline: \(reason)", logger: logger)
                return
            }
            do {
                guard try await store.rescheduleOutbox(id: item.id, at: next, error: reason) else {
                    logger.info("ended elsewhere while it was being sent (a newer code replaced it)")
                    return
                }
            } catch {
                logger.error("cannot reschedule an outbox item", metadata: ["error": "\(error)"])
                return
            }
            metrics.outbox(kind: item.kind, outcome: "retried")
            logger.warning(
                "delivery failed; will retry",
                metadata: ["attempt": "\(item.attempts)", "in": "\(Int(next.timeIntervalSince(now()).rounded()))s", "reason": "\(reason)"])
            audit.record(await auditEvent(.retried, item, "attempt \(item.attempts): \(reason)"))
        }
    }

    private func end(_ item: OutboxItem, _ end: OutboxEnd, _ detail: String, logger: Logger) async {
        do {
            guard try await store.finishOutbox(id: item.id, as: end, detail: detail, at: now()) else {
                // A newer code dropped it while it was being sent; that drop was audited then.
                logger.info("ended elsewhere while it was being sent", metadata: ["outcome": "\(end.rawValue)"])
                if end == .delivered {
                    audit.record(
                        await auditEvent(.delivered, item, "attempt \(item.attempts): \(detail); a newer code had replaced it meanwhile"))
                }
                return
            }
        } catch {
            // The lease runs out and the row is tried again: at least once.
            logger.error("cannot record an outbox item's end", metadata: ["error": "\(error)"])
            return
        }
        metrics.outbox(kind: item.kind, outcome: end.rawValue)
        switch end {
        case .delivered:
            logger.info("delivered", metadata: ["attempt": "\(item.attempts)"])
        case .failed:
            logger.error("delivery refused for good; not retried", metadata: ["reason": "\(detail)"])
        case .dropped:
            logger.warning("dropped", metadata: ["reason": "\(detail)"])
        }
        audit.record(await auditEvent(Outcome(end), item, "attempt \(item.attempts): \(detail)"))
    }

    /// What happened to an attempt, for the audit trail.
    enum Outcome {
        case delivered, retried, failed, dropped

        init(_ end: OutboxEnd) {
            switch end {
            case .delivered: self = .delivered
            case .failed: self = .failed
            case .dropped: self = .dropped
            }
        }
    }

    /// A mail is named by its outbox id; a webhook event by its approval's log reference, with the event id in the detail.
    /// The audit event of an attempt; a webhook's names its integration (approvals-api.md), from the detail or looked up.
    func auditEvent(_ outcome: Outcome, _ item: OutboxItem, _ detail: String) async -> AuditEvent {
        var detail = detail
        if item.kind == .webhook, !detail.contains("integration "), let subject = await deliverers[item.kind]?.auditSubject(of: item) {
            detail = "\(subject), \(detail)"
        }
        return Self.auditEvent(outcome, item, detail)
    }

    static func auditEvent(_ outcome: Outcome, _ item: OutboxItem, _ detail: String) -> AuditEvent {
        switch item.kind {
        case .mail:
            let kind: AuditKind =
                switch outcome {
                case .delivered: .mailSent
                case .retried: .mailRetried
                case .failed: .mailFailed
                case .dropped: .mailDropped
                }
            return AuditEvent(kind: kind, userID: item.userID, requestRef: item.id, detail: detail)
        case .webhook:
            let kind: AuditKind =
                switch outcome {
                case .delivered: .webhookDelivered
                case .retried: .webhookRetried
                case .failed: .webhookFailed
                case .dropped: .webhookDropped
                }
            // An approval's event is filed under the approval's log reference; a test event (about its integration) under none.
            let approvalID = item.reference == item.integrationID ? nil : item.reference
            return AuditEvent(
                kind: kind, userID: item.userID, requestRef: approvalID.map(ApprovalRequest.logReference(of:)), detail: "event \(item.id), \(detail)")
        }
    }
}

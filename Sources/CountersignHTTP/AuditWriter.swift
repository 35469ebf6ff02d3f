import CountersignCore
import CountersignStore
import Foundation
import Logging
import ServiceLifecycle

/// Writes the audit log's events to the database in batches, one transaction
/// per wake-up; on shutdown it writes what is left.
struct AuditWriter: Service {
    let log: AuditLog
    let store: any AuditStore
    let logger: Logger

    func run() async throws {
        for await _ in log.wakeups.cancelOnGracefulShutdown() {
            await flush()
        }
        await flush()
    }

    func flush() async {
        let (events, dropped) = log.take()
        if dropped > 0 {
            logger.error("audit events dropped: the writer fell behind", metadata: ["dropped": "\(dropped)"])
        }
        guard !events.isEmpty else { return }
        do {
            try await store.append(events)
        } catch {
            logger.error("cannot write audit events", metadata: ["count": "\(events.count)", "error": "\(error)"])
        }
    }
}

/// Hourly upkeep: prunes audit events and finished requests past the retention.
struct MaintenanceService: Service {
    let store: SQLiteStore
    let retention: TimeInterval
    let logger: Logger
    var interval: Duration = .seconds(3600)

    func run() async throws {
        while !Task.isShuttingDownGracefully && !Task.isCancelled {
            let cutoff = Date().addingTimeInterval(-retention)
            do {
                let events = try await store.pruneAudit(before: cutoff)
                let requests = try await store.pruneFinishedRequests(before: cutoff)
                if events + requests > 0 {
                    logger.info("pruned old records", metadata: ["auditEvents": "\(events)", "requests": "\(requests)"])
                }
            } catch {
                logger.error("pruning failed", metadata: ["error": "\(error)"])
            }
            try? await cancelWhenGracefulShutdown { try await Task.sleep(for: interval) }
        }
    }
}

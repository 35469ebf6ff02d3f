import CountersignCore
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

import CountersignCore
import Foundation
import Logging
import ServiceLifecycle

/// Writes the audit log's events to the database in batches, one transaction
/// per wake-up; on shutdown it writes what is left. While the database does
/// not answer (``StoreUnavailable``), the events wait in the log (bounded by
/// its capacity) and are tried again after a pause.
public struct AuditWriter: Service {
    let log: AuditLog
    let store: any AuditStore
    let logger: Logger
    var firstPause = Duration.milliseconds(500)
    var longestPause = Duration.seconds(5)

    /// - Parameters:
    ///   - firstPause: after a failed write, the wait before the next; doubled each time up to `longestPause`.
    public init(
        log: AuditLog, store: any AuditStore, logger: Logger, firstPause: Duration = .milliseconds(500), longestPause: Duration = .seconds(5)
    ) {
        self.log = log
        self.store = store
        self.logger = logger
        self.firstPause = firstPause
        self.longestPause = longestPause
    }

    public func run() async throws {
        var pause = firstPause
        for await _ in log.wakeups.cancelOnGracefulShutdown() {
            if await flush() {
                pause = firstPause
            } else {
                try? await Task.sleep(for: pause)
                pause = min(pause * 2, longestPause)
                log.wake()
            }
        }
        await flush()
    }

    /// Writes what the log holds; `false` when the database did not answer and the events went back to wait.
    @discardableResult
    func flush() async -> Bool {
        let (events, dropped) = log.take()
        if dropped > 0 {
            logger.error("audit events dropped: the writer fell behind", metadata: ["dropped": "\(dropped)"])
        }
        guard !events.isEmpty else { return true }
        do {
            try await store.append(events)
        } catch is StoreUnavailable {
            log.putBack(events)
            logger.warning("audit events wait: the database did not answer", metadata: ["count": "\(events.count)"])
            return false
        } catch {
            logger.error("cannot write audit events", metadata: ["count": "\(events.count)", "error": "\(error)"])
        }
        return true
    }
}

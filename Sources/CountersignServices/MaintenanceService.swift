import CountersignCore
import Foundation
import Logging
import ServiceLifecycle

/// Hourly upkeep: prunes audit events and finished requests past the retention.
public struct MaintenanceService: Service {
    let store: any StoreMaintenance
    let retention: TimeInterval
    let logger: Logger
    var interval: Duration = .seconds(3600)

    public init(store: any StoreMaintenance, retention: TimeInterval, logger: Logger) {
        self.store = store
        self.retention = retention
        self.logger = logger
    }

    public func run() async throws {
        while !Task.isShuttingDownGracefully && !Task.isCancelled {
            let cutoff = Date().addingTimeInterval(-retention)
            do {
                let events = try await store.pruneAudit(before: cutoff)
                let requests = try await store.pruneFinishedRequests(before: cutoff)
                let resets = try await store.pruneFinishedResets(before: cutoff)
                if events + requests + resets > 0 {
                    logger.info(
                        "pruned old records", metadata: ["auditEvents": "\(events)", "requests": "\(requests)", "emailResets": "\(resets)"])
                }
            } catch {
                logger.error("pruning failed", metadata: ["error": "\(error)"])
            }
            try? await cancelWhenGracefulShutdown { try await Task.sleep(for: interval) }
        }
    }
}

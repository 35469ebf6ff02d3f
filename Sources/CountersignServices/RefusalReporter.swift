import CountersignCore
import Foundation
import Logging
import ServiceLifecycle

/// Reports rate-limit refusals once per limit, key and window: one audit event
/// and one log line carrying the count, when the window ends (every second it
/// looks), and for the windows still open when the daemon shuts down. Listed
/// after the audit writer, so it shuts down first and the writer stores its last reports.
public struct RefusalReporter: Service {
    let limits: LimitCounters
    let audit: AuditLog
    let logger: Logger
    var interval: Duration = .seconds(1)

    public init(limits: LimitCounters, audit: AuditLog, logger: Logger) {
        self.limits = limits
        self.audit = audit
        self.logger = logger
    }

    public func run() async throws {
        while !Task.isShuttingDownGracefully && !Task.isCancelled {
            report(limits.takeReports())
            try? await cancelWhenGracefulShutdown { try await Task.sleep(for: interval) }
        }
        report(limits.takeReports(includingOpenWindows: true))
    }

    func report(_ reports: [(name: RateLimitName, report: WindowCounter.Report)]) {
        // The first refusal was audited when it happened; the rest of its window is one summary.
        for (name, report) in reports where report.refusals > 1 {
            var event = report.firstRefusal
            event.at = Date()
            event.kind = .rateLimitedSummary
            event.detail = "\(name.rawValue): \(report.refusals - 1) more refused after the first"
            logger.notice(
                "rate limited",
                metadata: ["limit": "\(name.rawValue)", "ip": "\(event.ip ?? "unknown")", "refused": "\(report.refusals)"])
            audit.record(event)
        }
    }
}

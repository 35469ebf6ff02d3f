import CountersignCore
import Logging
import ServiceLifecycle

/// Writes `expired` for overdue requests a few times a second, so that a
/// request is stored as expired within about a second of its deadline and its
/// long polls wake then.
public struct ExpiryService: Service {
    let broker: ApprovalBroker
    let interval: Duration
    let logger: Logger

    public init(broker: ApprovalBroker, interval: Duration, logger: Logger) {
        self.broker = broker
        self.interval = interval
        self.logger = logger
    }

    public func run() async throws {
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            do {
                try await broker.expireDue()
            } catch {
                logger.error("expiry sweep failed", metadata: ["error": "\(error)"])
            }
            try? await Task.sleep(for: interval)
        }
    }
}

import CountersignCore
import Logging
import ServiceLifecycle

/// Takes push jobs from the broker's queue, finds the user's push-enabled
/// devices and hands each message to the ``PushSender``, with at most
/// `maxConcurrent` sends in flight.
public struct PushDispatcher: Service {
    let queue: PushQueue
    let accounts: any PushTargetStore
    let sender: any PushSender
    let audit: AuditLog
    let metrics: AppMetrics
    let logger: Logger
    var maxConcurrent = 64

    public init(queue: PushQueue, accounts: any PushTargetStore, sender: any PushSender, audit: AuditLog, metrics: AppMetrics, logger: Logger) {
        self.queue = queue
        self.accounts = accounts
        self.sender = sender
        self.audit = audit
        self.metrics = metrics
        self.logger = logger
    }

    public func run() async throws {
        await withTaskGroup(of: Void.self) { group in
            var inFlight = 0
            for await job in queue.cancelOnGracefulShutdown() {
                let devices: [Device]
                do {
                    devices = try await accounts.devices(userID: job.userID).filter {
                        $0.pushEnabled && $0.push != nil && $0.id != job.excludedDeviceID
                    }
                } catch {
                    logger.error("cannot read devices for push", metadata: ["error": "\(error)"])
                    continue
                }
                let requestRef = job.requestRef
                for device in devices {
                    if inFlight >= maxConcurrent {
                        await group.next()
                        inFlight -= 1
                    }
                    inFlight += 1
                    group.addTask {
                        let outcome = await sender.send(job, to: device, logger: logger)
                        let provider = device.push?.provider ?? .fcm
                        metrics.push(type: job.type, outcome: outcome, provider: provider)
                        if outcome != .disabled {
                            audit.record(
                                AuditEvent(
                                    kind: .pushed, userID: device.userID, deviceID: device.id, requestRef: requestRef,
                                    detail: "\(job.type): \(outcome.rawValue) (\(provider.rawValue))"))
                        }
                    }
                }
            }
        }
    }
}

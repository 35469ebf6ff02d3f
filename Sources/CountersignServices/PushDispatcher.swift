import CountersignCore
import Logging
import ServiceLifecycle
import Synchronization

/// Takes push jobs from the broker's queue, finds the user's push-enabled
/// devices and hands each message to the ``PushSender``.
///
/// Each provider has a lane of its own, with at most `maxConcurrent` sends in
/// flight: a provider that answers slowly holds only its own lane. A Web Push
/// endpoint is a device's choice, so one that never answers must not hold up
/// the FCM and APNs prompts of every other user.
public struct PushDispatcher: Service {
    let queue: PushQueue
    let accounts: any PushTargetStore
    let sender: any PushSender
    let audit: AuditLog
    let metrics: AppMetrics
    let logger: Logger
    /// Sends in flight per provider.
    var maxConcurrent = 64
    /// Sends waiting in one lane before the oldest is dropped (a prompt that
    /// waited that long is stale anyway).
    var laneCapacity = 10_000

    public init(queue: PushQueue, accounts: any PushTargetStore, sender: any PushSender, audit: AuditLog, metrics: AppMetrics, logger: Logger) {
        self.queue = queue
        self.accounts = accounts
        self.sender = sender
        self.audit = audit
        self.metrics = metrics
        self.logger = logger
    }

    struct Send: Sendable {
        let job: PushJob
        let device: Device
    }

    public func run() async throws {
        let lanes = Dictionary(
            uniqueKeysWithValues: PushProvider.allCases.map { ($0, AsyncStream<Send>.makeStream(bufferingPolicy: .bufferingNewest(laneCapacity))) })
        // Once the queue ends (shutdown), what still waits in a lane is dropped; sends in flight finish.
        let stopping = StopFlag()
        await withTaskGroup(of: Void.self) { group in
            for lane in lanes.values {
                group.addTask { await drain(lane.stream, stopping: stopping) }
            }
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
                for device in devices {
                    let provider = device.push?.provider ?? .fcm
                    if case .dropped(let old) = lanes[provider]?.continuation.yield(Send(job: job, device: device)) {
                        logger.warning(
                            "push dropped: too many sends wait for this provider",
                            metadata: ["provider": "\(provider.rawValue)", "type": "\(old.job.type)", "device": "\(old.device.id)"])
                        metrics.push(type: old.job.type, outcome: .dropped, provider: provider)
                    }
                }
            }
            stopping.raise()
            for lane in lanes.values { lane.continuation.finish() }
        }
    }

    /// Sends one lane's messages, `maxConcurrent` at a time.
    private func drain(_ sends: AsyncStream<Send>, stopping: StopFlag) async {
        await withTaskGroup(of: Void.self) { group in
            var inFlight = 0
            for await send in sends where !stopping.isRaised {
                if inFlight >= maxConcurrent {
                    await group.next()
                    inFlight -= 1
                }
                inFlight += 1
                group.addTask { await deliver(send) }
            }
        }
    }

    private func deliver(_ send: Send) async {
        let (job, device) = (send.job, send.device)
        let outcome = await sender.send(job, to: device, logger: logger)
        let provider = device.push?.provider ?? .fcm
        metrics.push(type: job.type, outcome: outcome, provider: provider)
        if outcome != .disabled {
            audit.record(
                AuditEvent(
                    kind: .pushed, userID: device.userID, deviceID: device.id, requestRef: job.requestRef,
                    detail: "\(job.type): \(outcome.rawValue) (\(provider.rawValue))"))
        }
    }
}

/// Set once, read by every lane.
final class StopFlag: Sendable {
    private let raised = Mutex(false)
    func raise() { raised.withLock { $0 = true } }
    var isRaised: Bool { raised.withLock { $0 } }
}

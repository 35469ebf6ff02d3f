import CountersignCore
import Logging
import ServiceLifecycle

/// Takes push jobs from the broker's queue, finds the user's push-enabled
/// devices and hands each message to the ``PushSender``.
///
/// Each configured provider has a lane of its own (and one more takes the
/// devices of providers not configured here), with at most `maxConcurrent`
/// sends in flight: a provider that answers slowly holds only its own lane. A
/// Web Push endpoint is a device's choice, so one that never answers must not
/// hold up the FCM and APNs prompts of every other user. A lane is a
/// ``PromptFirstQueue`` of jobs with their devices, bounded like the push
/// queue: prompts first, the oldest dropped when a stalled lane fills up.
public struct PushDispatcher: Service {
    let queue: PushQueue
    let accounts: any PushTargetStore
    let sender: any PushSender
    let audit: AuditLog
    let metrics: AppMetrics
    let logger: Logger
    /// Sends in flight per lane.
    var maxConcurrent = 64
    /// Jobs waiting in one lane before the oldest of its kind is dropped.
    var laneCapacity = 10_000

    public init(queue: PushQueue, accounts: any PushTargetStore, sender: any PushSender, audit: AuditLog, metrics: AppMetrics, logger: Logger) {
        self.queue = queue
        self.accounts = accounts
        self.sender = sender
        self.audit = audit
        self.metrics = metrics
        self.logger = logger
    }

    /// One job's devices that one lane sends to.
    struct Sends: Sendable {
        let job: PushJob
        let devices: [Device]
    }

    public func run() async throws {
        let configured = Set(sender.offer.providers)
        // `nil`: the devices of providers not configured here (with push off, all of them).
        let lanes: [PushProvider?: PromptFirstQueue<Sends>] = Dictionary(
            uniqueKeysWithValues: (configured.map { Optional($0) } + [nil]).map {
                ($0, PromptFirstQueue(capacity: laneCapacity, isPrompt: \.job.isPrompt))
            })
        await withTaskGroup(of: Void.self) { group in
            for lane in lanes.values {
                group.addTask { await drain(lane) }
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
                let byLane = Dictionary(grouping: devices) { device in device.push.map(\.provider).flatMap { configured.contains($0) ? $0 : nil } }
                for (provider, devices) in byLane {
                    guard let dropped = lanes[provider]?.enqueue(Sends(job: job, devices: devices)) else { continue }
                    logger.warning(
                        "push dropped: too many jobs wait for this provider",
                        metadata: [
                            "provider": "\(provider?.rawValue ?? "none")", "type": "\(dropped.job.type)", "devices": "\(dropped.devices.count)",
                        ])
                    for device in dropped.devices {
                        metrics.push(type: dropped.job.type, outcome: .dropped, provider: device.push?.provider ?? .fcm)
                    }
                }
            }
            // Shutting down: sends in flight finish; what still waits in a lane is left, as in the push queue.
            for lane in lanes.values { lane.finish() }
        }
    }

    /// Sends one lane's messages, `maxConcurrent` at a time.
    private func drain(_ lane: PromptFirstQueue<Sends>) async {
        await withTaskGroup(of: Void.self) { group in
            var inFlight = 0
            for await sends in lane {
                for device in sends.devices {
                    if inFlight >= maxConcurrent {
                        await group.next()
                        inFlight -= 1
                    }
                    inFlight += 1
                    group.addTask { await deliver(sends.job, to: device) }
                }
            }
        }
    }

    private func deliver(_ job: PushJob, to device: Device) async {
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

import CountersignCore
import Logging
import ServiceLifecycle
import Synchronization

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
            for (provider, lane) in lanes {
                // A provider not configured here sends nothing: its devices one at a time, as always.
                let perSend = provider.map { sender.devicesPerSend($0) } ?? 1
                group.addTask { await drain(lane, perSend: perSend) }
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

    /// Sends one lane's messages, `maxConcurrent` at a time, a job's devices `perSend` to a call of the
    /// sender (its choice: FCM's puts them on the wire together; the others send each device on its own). A
    /// device's place in flight is given back as soon as its outcome is known: one that is retried holds one.
    private func drain(_ lane: PromptFirstQueue<Sends>, perSend: Int) async {
        let slots = SendSlots(maxConcurrent)
        await withDiscardingTaskGroup { group in
            for await sends in lane {
                var rest = sends.devices[...]
                while !rest.isEmpty {
                    let devices = Array(rest.prefix(max(1, min(perSend, maxConcurrent))))
                    rest = rest.dropFirst(devices.count)
                    await slots.take(devices.count)
                    group.addTask { await deliver(sends.job, to: devices, slots: slots) }
                }
            }
        }
    }

    private func deliver(_ job: PushJob, to devices: [Device], slots: SendSlots) async {
        let open = Mutex(Array(repeating: true, count: devices.count))
        await sender.send(job, to: devices, logger: logger) { index, outcome in
            // Told once per device: a second word about one is ignored.
            let first = open.withLock { open -> Bool in
                guard open.indices.contains(index), open[index] else { return false }
                open[index] = false
                return true
            }
            guard first else { return }
            record(job, devices[index], outcome)
            slots.give(1)
        }
        // A sender that ended without telling every outcome gives no place back twice, and keeps none.
        let left = open.withLock { $0.filter { $0 }.count }
        if left > 0 {
            logger.error("push sender ended without an outcome for every device", metadata: ["devices": "\(left)"])
            slots.give(left)
        }
    }

    private func record(_ job: PushJob, _ device: Device, _ outcome: PushOutcome) {
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

/// Places for sends in flight in one lane: its drain takes them before each call of the sender, and each
/// device's outcome gives one back. One taker at a time (the lane's drain).
final class SendSlots: Sendable {
    private struct State {
        var free: Int
        var waiter: (needed: Int, continuation: CheckedContinuation<Void, Never>)?
    }
    private let state: Mutex<State>

    init(_ count: Int) { state = Mutex(State(free: count)) }

    /// Waits until `count` places are free, and takes them.
    func take(_ count: Int) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now: Bool = state.withLock { state in
                guard state.free >= count else {
                    state.waiter = (count, continuation)
                    return false
                }
                state.free -= count
                return true
            }
            if now { continuation.resume() }
        }
    }

    func give(_ count: Int) {
        let ready: CheckedContinuation<Void, Never>? = state.withLock { state in
            state.free += count
            guard let waiter = state.waiter, state.free >= waiter.needed else { return nil }
            state.free -= waiter.needed
            state.waiter = nil
            return waiter.continuation
        }
        ready?.resume()
    }
}

import CountersignCore
import Foundation
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
/// Within a lane, sends to one endpoint host a device chose (Web Push) are
/// bounded too (``maxPerHost``, `--push-per-host-in-flight`): one account's
/// devices pointed at a host that never answers hold that many slots at most,
/// and their other sends wait for that host alone (``HostSlots``).
public struct PushDispatcher: Service {
    let queue: PushQueue
    let accounts: any PushTargetStore
    let sender: any PushSender
    let audit: AuditLog
    let metrics: AppMetrics
    let logger: Logger
    /// Sends in flight per lane.
    var maxConcurrent = 64
    /// Sends in flight to one Web Push endpoint host within a lane.
    var maxPerHost: Int
    /// Jobs waiting in one lane before the oldest of its kind is dropped.
    var laneCapacity = 10_000

    public init(
        queue: PushQueue, accounts: any PushTargetStore, sender: any PushSender, audit: AuditLog, metrics: AppMetrics, logger: Logger,
        maxPerHost: Int = PushDispatcher.defaultMaxPerHost
    ) {
        self.maxPerHost = maxPerHost
        self.queue = queue
        self.accounts = accounts
        self.sender = sender
        self.audit = audit
        self.metrics = metrics
        self.logger = logger
    }

    /// The default of `--push-per-host-in-flight`.
    public static let defaultMaxPerHost = 4

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
            for await first in queue.cancelOnGracefulShutdown() {
                // The same user's jobs at the front of the queue came before the read below, so one
                // read of the devices serves them all (a create queues two: the replaced prompt's
                // notice and the new prompt), each job still seeing the devices as they were after
                // it was queued. Only that user's: another user's prompt waits for no other read.
                let jobs = [first] + queue.takeWaiting(upTo: Self.jobsPerRead - 1) { $0.userID == first.userID }
                var read: [Device]?
                for job in jobs {
                    let devices: [Device]
                    if let read {
                        devices = read
                    } else {
                        if Task.isCancelled { break }
                        do {
                            devices = try await accounts.devices(userID: job.userID)
                        } catch {
                            // Not kept: the next job reads again, as each did on its own.
                            logger.error("cannot read devices for push", metadata: ["error": "\(error)"])
                            continue
                        }
                        read = devices
                    }
                    route(
                        job, to: devices.filter { $0.pushEnabled && $0.push != nil && $0.id != job.excludedDeviceID }, lanes: lanes,
                        configured: configured)
                }
            }
            // Shutting down: sends in flight finish; what still waits in a lane is left, as in the push queue.
            for lane in lanes.values { lane.finish() }
        }
    }

    /// One user's jobs taken from the push queue at once, their devices read once.
    static let jobsPerRead = 64

    /// Hands `job`'s devices to the lanes of their providers.
    private func route(_ job: PushJob, to devices: [Device], lanes: [PushProvider?: PromptFirstQueue<Sends>], configured: Set<PushProvider>) {
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

    /// One message to one device, and the endpoint host it is bounded under.
    struct Send: Sendable {
        let job: PushJob
        let device: Device
        let host: String?
    }

    /// The host a send is bounded under: a Web Push endpoint's (the device chose it);
    /// `nil` for FCM and APNs, whose one host is the provider's own.
    static func endpointHost(_ device: Device) -> String? {
        guard let push = device.push, push.provider == .webPush else { return nil }
        return URL(string: push.token)?.host?.lowercased() ?? ""
    }

    /// ``HostSlots`` shared by a lane's drain and the tasks that end its sends.
    final class SharedHostSlots: Sendable {
        private let slots: Mutex<HostSlots<Send>>

        init(perHost: Int) { slots = Mutex(HostSlots(perHost: perHost)) }

        func admit(_ send: Send) -> HostSlots<Send>.Admission {
            slots.withLock { $0.admit(send, host: send.host, isPrompt: send.job.isPrompt) }
        }

        /// `send` ended: its host's next waiting send, if any.
        func finished(_ send: Send) -> Send? { slots.withLock { $0.finished(host: send.host) } }
    }

    /// Sends one lane's messages, `maxConcurrent` at a time and ``maxPerHost`` per endpoint host.
    /// A send whose host is at its bound waits for that host alone: the task that ends a send to
    /// a host takes that host's next waiting send (prompts first), keeping its lane slot, so the
    /// lane's other hosts never wait behind it.
    private func drain(_ lane: PromptFirstQueue<Sends>) async {
        let hosts = SharedHostSlots(perHost: maxPerHost)
        await withTaskGroup(of: Void.self) { group in
            var inFlight = 0
            for await sends in lane {
                for device in sends.devices {
                    let send = Send(job: sends.job, device: device, host: Self.endpointHost(device))
                    switch hosts.admit(send) {
                    case .wait(let dropped):
                        if let dropped { dropPush(dropped, reason: "too many sends wait for this endpoint host") }
                        continue
                    case .start:
                        break
                    }
                    if inFlight >= maxConcurrent {
                        await group.next()
                        inFlight -= 1
                    }
                    inFlight += 1
                    group.addTask {
                        var next: Send? = send
                        while let current = next {
                            await deliver(current.job, to: current.device)
                            next = hosts.finished(current)
                        }
                    }
                }
            }
        }
    }

    private func dropPush(_ send: Send, reason: String) {
        logger.warning("push dropped: \(reason)", metadata: ["type": "\(send.job.type)", "device": "\(send.device.id)"])
        metrics.push(type: send.job.type, outcome: .dropped, provider: send.device.push?.provider ?? .fcm)
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

import CountersignCore
import Foundation
import Logging
import Synchronization
import Testing

@testable import CountersignServices

/// push-providers.md beside trust.md: each provider has a lane of its own, so
/// a Web Push endpoint that never answers (the device chose it) holds up no
/// FCM or APNs prompt.
@Suite struct PushDispatcherTests {
    /// Web Push sends wait until released; the others are answered at once.
    final class StalledWebPush: PushSender {
        var offer: PushOffer { PushOffer(providers: [.fcm, .apns, .webPush]) }
        let delivered = Mutex<[String]>([])
        let stalled = Mutex<[CheckedContinuation<Void, Never>]>([])

        func send(_ job: PushJob, to device: Device, logger: Logger) async -> PushOutcome {
            if device.push?.provider == .webPush {
                await withCheckedContinuation { continuation in stalled.withLock { $0.append(continuation) } }
            }
            delivered.withLock { $0.append(device.id) }
            return .sent
        }

        func release() {
            for continuation in stalled.withLock({ list in
                defer { list = [] }
                return list
            }) { continuation.resume() }
        }
    }

    final class Devices: PushTargetStore {
        let list: [Device]
        init(_ list: [Device]) { self.list = list }
        func devices(userID: String) async throws -> [Device] { list.filter { $0.userID == userID } }
        func disablePush(deviceID: String, token: String) async throws {}
    }

    static func device(_ id: String, user: String, _ push: PushAddress) -> Device {
        Device(id: id, userID: user, name: id, platform: "android", push: push, pushEnabled: true, createdAt: Date())
    }

    @Test func aStalledWebPushLaneHoldsUpNoFCMOrAPNsPrompt() async throws {
        let web = PushAddress.webPush(endpoint: "https://push.example.net/x", key: Data(count: 65), auth: Data(count: 16))
        // Mallory's twenty Web Push devices fill more than a lane's sends in flight.
        var devices = (0..<20).map { Self.device("mallory-\($0)", user: "mallory", web) }
        devices.append(Self.device("ana-fcm", user: "ana", .fcm("ana-token")))
        devices.append(Self.device("bob-apns", user: "bob", .apns(token: String(repeating: "ab", count: 32), topic: "t", environment: .production)))
        let sender = StalledWebPush()
        let queue = PushQueue()
        // One host for all twenty: the per-host bound is lifted here, so that the lane's own bound (8) is what holds.
        var dispatcher = PushDispatcher(
            queue: queue, accounts: Devices(devices), sender: sender, audit: AuditLog(), metrics: AppMetrics(), logger: Logger(label: "test"),
            maxPerHost: 64)
        dispatcher.maxConcurrent = 8
        let running = Task { try await dispatcher.run() }
        let expires = Date().addingTimeInterval(3600)
        let requester = RequesterInfo(ip: "203.0.113.7", userAgent: nil)
        for round in 0..<3 {
            queue.enqueue(.prompt(requestID: "m\(round)", userID: "mallory", action: .passwordReset, expiresAt: expires, requester: requester))
        }
        queue.enqueue(.prompt(requestID: "a", userID: "ana", action: .passwordReset, expiresAt: expires, requester: requester))
        queue.enqueue(.prompt(requestID: "b", userID: "bob", action: .passwordReset, expiresAt: expires, requester: requester))
        // Bounded only to turn a hang into a failure.
        for _ in 0..<500 where sender.delivered.withLock({ $0.count }) < 2 { try await Task.sleep(for: .milliseconds(10)) }
        #expect(Set(sender.delivered.withLock { $0 }) == ["ana-fcm", "bob-apns"])
        #expect(sender.stalled.withLock { $0.count } == 8)
        sender.release()
        for _ in 0..<500 where sender.delivered.withLock({ $0.count }) < 62 {
            sender.release()
            try await Task.sleep(for: .milliseconds(10))
        }
        #expect(sender.delivered.withLock { $0.count } == 62)
        running.cancel()
    }

    /// Web Push sends to one host wait until released; the others are answered at once.
    final class BlackHoleHost: PushSender {
        var offer: PushOffer { PushOffer(providers: [.fcm, .webPush]) }
        let delivered = Mutex<[String]>([])
        let stalled = Mutex<[CheckedContinuation<Void, Never>]>([])
        let mostStalled = Mutex(0)

        func send(_ job: PushJob, to device: Device, logger: Logger) async -> PushOutcome {
            if device.push?.token.hasPrefix("https://black-hole.example/") == true {
                await withCheckedContinuation { continuation in
                    stalled.withLock { list in
                        list.append(continuation)
                        mostStalled.withLock { $0 = max($0, list.count) }
                    }
                }
            }
            delivered.withLock { $0.append("\(device.id):\(job.type)") }
            return .sent
        }

        func releaseOne() {
            stalled.withLock { $0.isEmpty ? nil : $0.removeFirst() }?.resume()
        }
    }

    /// trust.md: within a lane, sends to one endpoint host are bounded, so one
    /// account's twenty devices pointed at a host that never answers take no
    /// more than that many slots; another user's Web Push prompt goes out at
    /// once, and the host's waiting sends go out, prompts first, as it answers.
    @Test func aHostThatNeverAnswersHoldsNoMoreThanItsShareOfTheLane() async throws {
        let hole = PushAddress.webPush(endpoint: "https://black-hole.example/x", key: Data(count: 65), auth: Data(count: 16))
        let other = PushAddress.webPush(endpoint: "https://push.example.net/ana", key: Data(count: 65), auth: Data(count: 16))
        var devices = (0..<20).map { Self.device("mallory-\($0)", user: "mallory", hole) }
        devices.append(Self.device("ana-web", user: "ana", other))
        let sender = BlackHoleHost()
        let queue = PushQueue()
        // The lane's 64 slots, and the default per-host bound of 4.
        let dispatcher = PushDispatcher(
            queue: queue, accounts: Devices(devices), sender: sender, audit: AuditLog(), metrics: AppMetrics(), logger: Logger(label: "test"),
            maxPerHost: 4)
        let running = Task { try await dispatcher.run() }
        let expires = Date().addingTimeInterval(3600)
        let requester = RequesterInfo(ip: "203.0.113.7", userAgent: nil)
        // 100 prompts for the black hole, more than the lane's 64, then a notice for it, then ana's prompt.
        for round in 0..<5 {
            queue.enqueue(.prompt(requestID: "m\(round)", userID: "mallory", action: .passwordReset, expiresAt: expires, requester: requester))
        }
        queue.enqueue(.resolved(requestID: "m0", userID: "mallory", status: .cancelled))
        queue.enqueue(.prompt(requestID: "a", userID: "ana", action: .passwordReset, expiresAt: expires, requester: requester))
        // Bounded only to turn a hang into a failure.
        for _ in 0..<500 where !sender.delivered.withLock({ $0.contains("ana-web:approval_request") }) {
            try await Task.sleep(for: .milliseconds(10))
        }
        #expect(sender.delivered.withLock { $0 } == ["ana-web:approval_request"])
        #expect(sender.stalled.withLock { $0.count } == 4)
        // As the host answers, its waiting sends follow, four at a time: every prompt before the notice.
        for _ in 0..<2000 where sender.delivered.withLock({ $0.count }) < 121 {
            sender.releaseOne()
            try await Task.sleep(for: .milliseconds(1))
        }
        let delivered = sender.delivered.withLock { $0 }
        #expect(delivered.count == 121)
        #expect(sender.mostStalled.withLock { $0 } == 4)
        let lastPrompt = try #require(delivered.lastIndex { $0.hasSuffix(":approval_request") && $0.hasPrefix("mallory") })
        let firstNotice = try #require(delivered.firstIndex { $0.hasSuffix(":approval_resolved") })
        #expect(lastPrompt < firstNotice, "prompts before notices")
        running.cancel()
    }

    /// Counts its reads; a device may be added between them.
    final class CountedDevices: PushTargetStore {
        let list: Mutex<[Device]>
        let reads = Mutex(0)
        init(_ list: [Device]) { self.list = Mutex(list) }
        func devices(userID: String) async throws -> [Device] {
            reads.withLock { $0 += 1 }
            return list.withLock { list in list.filter { $0.userID == userID } }
        }
        func disablePush(deviceID: String, token: String) async throws {}
    }

    /// Records each send as `device:type`.
    final class Recording: PushSender {
        var offer: PushOffer { PushOffer(providers: [.fcm]) }
        let delivered = Mutex<[String]>([])
        func send(_ job: PushJob, to device: Device, logger: Logger) async -> PushOutcome {
            delivered.withLock { $0.append("\(device.id):\(job.type)") }
            return .sent
        }
    }

    /// Jobs queued together for one user (a create queues two: the replaced prompt's notice and
    /// the new prompt) share one read of the user's devices, each job still sent to the devices it
    /// is for. A job queued after that read is read for again: a device added in between gets it.
    @Test func jobsQueuedTogetherShareOneReadOfTheUsersDevicesAndALaterJobReadsAgain() async throws {
        let store = CountedDevices([
            Self.device("ana-1", user: "ana", .fcm("t1")), Self.device("ana-2", user: "ana", .fcm("t2")),
            Self.device("bob-1", user: "bob", .fcm("t4")),
        ])
        let sender = Recording()
        let queue = PushQueue()
        let expires = Date().addingTimeInterval(3600)
        let requester = RequesterInfo(ip: "203.0.113.7", userAgent: nil)
        queue.enqueue(.deviceAdded(userID: "ana", deviceID: "ana-2", deviceName: "new phone", platform: "android", at: Date()))
        queue.enqueue(.resolved(requestID: "b1", userID: "bob", status: .cancelled))
        queue.enqueue(.prompt(requestID: "r1", userID: "ana", action: .passwordReset, expiresAt: expires, requester: requester))
        let dispatcher = PushDispatcher(
            queue: queue, accounts: store, sender: sender, audit: AuditLog(), metrics: AppMetrics(), logger: Logger(label: "test"))
        let running = Task { try await dispatcher.run() }
        defer { running.cancel() }
        // Bounded only to turn a hang into a failure.
        for _ in 0..<500 where sender.delivered.withLock({ $0.count }) < 4 { try await Task.sleep(for: .milliseconds(10)) }
        #expect(
            Set(sender.delivered.withLock { $0 }) == [
                "ana-1:device_added", "ana-1:approval_request", "ana-2:approval_request", "bob-1:approval_resolved",
            ])
        // Ana's two jobs, one read; bob's, another.
        #expect(store.reads.withLock { $0 } == 2)

        store.list.withLock { $0.append(Self.device("ana-3", user: "ana", .fcm("t3"))) }
        queue.enqueue(.prompt(requestID: "r2", userID: "ana", action: .passwordReset, expiresAt: expires, requester: requester))
        for _ in 0..<500 where sender.delivered.withLock({ $0.count }) < 7 { try await Task.sleep(for: .milliseconds(10)) }
        #expect(Set(sender.delivered.withLock { $0.dropFirst(4) }) == ["ana-1:approval_request", "ana-2:approval_request", "ana-3:approval_request"])
        #expect(store.reads.withLock { $0 } == 3)
    }

    /// One user's jobs are taken from the front of each queue only: another user's job ahead of
    /// them stops the taking there, so no job of that user's behind it is read for ahead of it.
    @Test func takingWhatWaitsTakesOnlyTheFrontsMatchesPromptsFirstUpToTheLimit() {
        let queue = PromptFirstQueue<String>(capacity: 10) { $0.hasPrefix("p") }
        #expect(queue.takeWaiting(upTo: 5) { _ in true }.isEmpty)
        for item in ["n-ana", "n-bob", "n-ana2", "p-ana", "p-bob", "p-ana2"] { queue.enqueue(item) }
        #expect(queue.takeWaiting(upTo: 5) { $0.hasPrefix("p-ana") || $0.hasPrefix("n-ana") } == ["p-ana", "n-ana"])
        #expect(queue.count == 4)
        #expect(queue.takeWaiting(upTo: 2) { _ in true } == ["p-bob", "p-ana2"])
        #expect(queue.takeWaiting(upTo: 5) { $0.hasSuffix("ana2") }.isEmpty, "n-bob is ahead")
        #expect(queue.takeWaiting(upTo: 5) { _ in true } == ["n-bob", "n-ana2"])
        #expect(queue.count == 0)
    }

    @Test func hostSlotsBoundAHostAndHandItsWaitingSendsOnPromptsFirst() {
        var slots = HostSlots<String>(perHost: 2, waitingPerHost: 3)
        #expect(slots.admit("p1", host: "h", isPrompt: true).started)
        #expect(slots.admit("p2", host: "h", isPrompt: true).started)
        #expect(!slots.admit("n1", host: "h", isPrompt: false).started)
        #expect(!slots.admit("p3", host: "h", isPrompt: true).started)
        #expect(slots.admit("x", host: "other", isPrompt: true).started, "another host is not held up")
        #expect(slots.admit("y", host: nil, isPrompt: false).started, "a provider's own host is the lane's to bound")
        #expect(!slots.admit("p4", host: "h", isPrompt: true).started)
        // Full: the oldest notice makes room.
        guard case .wait(let dropped) = slots.admit("p5", host: "h", isPrompt: true) else {
            Issue.record("p5 started past the bound")
            return
        }
        #expect(dropped == "n1")
        #expect(slots.finished(host: "h") == "p3")
        #expect(slots.finished(host: "h") == "p4")
        #expect(slots.finished(host: "h") == "p5")
        #expect(slots.finished(host: "h") == nil)
        #expect(slots.finished(host: "h") == nil)
        #expect(slots.admit("p6", host: "h", isPrompt: true).started, "both slots free again")
    }
}

extension HostSlots.Admission {
    var started: Bool {
        if case .start = self { return true }
        return false
    }
}

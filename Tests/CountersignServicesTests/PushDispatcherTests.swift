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
        var dispatcher = PushDispatcher(
            queue: queue, accounts: Devices(devices), sender: sender, audit: AuditLog(), metrics: AppMetrics(), logger: Logger(label: "test"))
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

    /// FCM takes a job's devices eight to a send, Web Push one. A device waits until released when `holds`
    /// says so; the others are answered at once.
    final class GroupingSender: PushSender {
        var offer: PushOffer { PushOffer(providers: [.fcm, .webPush]) }
        struct State {
            var groups: [(provider: PushProvider, size: Int)] = []
            var inFlight: [PushProvider: Int] = [:]
            var most: [PushProvider: Int] = [:]
            var waiting: [CheckedContinuation<Void, Never>] = []
            var delivered = 0
        }
        let state = Mutex(State())
        let holds: @Sendable (Device) -> Bool

        init(holds: @escaping @Sendable (Device) -> Bool) { self.holds = holds }

        func devicesPerSend(_ provider: PushProvider) -> Int { provider == .fcm ? 8 : 1 }

        func send(_ job: PushJob, to device: Device, logger: Logger) async -> PushOutcome {
            Issue.record("the dispatcher sends through send(_:to:logger:settled:)")
            return .rejected
        }

        func send(_ job: PushJob, to devices: [Device], logger: Logger, settled: @escaping @Sendable (Int, PushOutcome) -> Void) async {
            let provider = devices[0].push?.provider ?? .fcm
            state.withLock { state in
                state.groups.append((provider, devices.count))
                state.inFlight[provider, default: 0] += devices.count
                state.most[provider] = max(state.most[provider] ?? 0, state.inFlight[provider] ?? 0)
            }
            await withDiscardingTaskGroup { group in
                for (index, device) in devices.enumerated() {
                    group.addTask {
                        if self.holds(device) {
                            await withCheckedContinuation { continuation in self.state.withLock { $0.waiting.append(continuation) } }
                        }
                        self.state.withLock { state in
                            state.inFlight[provider, default: 0] -= 1
                            state.delivered += 1
                        }
                        settled(index, device.id.hasSuffix("-dead") ? .tokenDead : .sent)
                    }
                }
            }
        }

        func release() {
            for continuation in state.withLock({ state in
                defer { state.waiting = [] }
                return state.waiting
            }) { continuation.resume() }
        }
    }

    /// A sender that takes many devices at once gets a job's devices in groups of its size, never more in
    /// flight than the lane allows, and each device's outcome is counted and audited as its own.
    @Test func aJobsDevicesGoInGroupsOfTheSendersSizeWithinTheLimit() async throws {
        let web = PushAddress.webPush(endpoint: "https://push.example.net/x", key: Data(count: 65), auth: Data(count: 16))
        var devices = (0..<30).map { Self.device("fcm-\($0)\($0 % 10 == 3 ? "-dead" : "")", user: "ana", .fcm("token-\($0)")) }
        devices += (0..<3).map { Self.device("web-\($0)", user: "ana", web) }
        let sender = GroupingSender { _ in true }
        let queue = PushQueue()
        let audit = AuditLog()
        var dispatcher = PushDispatcher(
            queue: queue, accounts: Devices(devices), sender: sender, audit: audit, metrics: AppMetrics(), logger: Logger(label: "test"))
        dispatcher.maxConcurrent = 20
        let running = Task { try await dispatcher.run() }
        let expires = Date().addingTimeInterval(3600)
        let requester = RequesterInfo(ip: "203.0.113.7", userAgent: nil)
        for id in ["r1", "r2"] {
            queue.enqueue(.prompt(requestID: id, userID: "ana", action: .passwordReset, expiresAt: expires, requester: requester))
        }
        // Bounded only to turn a hang into a failure. The FCM lane stops at 16: a third group of 8 would pass 20.
        for _ in 0..<500 where sender.state.withLock({ $0.inFlight[.fcm] != 16 || $0.inFlight[.webPush] != 6 }) {
            try await Task.sleep(for: .milliseconds(10))
        }
        #expect(sender.state.withLock { $0.inFlight } == [.fcm: 16, .webPush: 6])
        for _ in 0..<1000 where sender.state.withLock({ $0.delivered }) < 66 {
            sender.release()
            try await Task.sleep(for: .milliseconds(5))
        }
        running.cancel()
        let state = sender.state.withLock { $0 }
        #expect(state.delivered == 66)
        #expect(state.most[.fcm].map { $0 <= 20 } == true)
        // Tasks may start in another order than they were made.
        #expect(state.groups.filter { $0.provider == .fcm }.map(\.size).sorted() == [6, 6, 8, 8, 8, 8, 8, 8])
        #expect(state.groups.filter { $0.provider == .webPush }.map(\.size) == [1, 1, 1, 1, 1, 1])
        let pushed = audit.take().events.filter { $0.kind == .pushed }
        #expect(pushed.count == 66)
        for device in devices {
            let events = pushed.filter { $0.deviceID == device.id }
            #expect(events.compactMap(\.requestRef).sorted() == ["r1", "r2"].map(ApprovalRequest.logReference(of:)).sorted(), "\(device.id)")
            let outcome = device.id.hasSuffix("-dead") ? "token_dead" : "sent"
            #expect(events.allSatisfy { $0.detail?.contains(": \(outcome) (") == true }, "\(device.id)")
        }
    }

    /// A device whose send goes on (retried, or slow to answer) holds its own place in flight only: the
    /// places of the devices beside it that were answered go to the next job at once.
    @Test func aSlowDeviceHoldsOnlyItsOwnPlace() async throws {
        let devices =
            (0..<8).map { Self.device("ana-\($0)\($0 == 5 ? "-slow" : "")", user: "ana", .fcm("ana-\($0)")) }
            + (0..<7).map { Self.device("bob-\($0)", user: "bob", .fcm("bob-\($0)")) }
        let sender = GroupingSender { $0.id.hasSuffix("-slow") }
        let queue = PushQueue()
        var dispatcher = PushDispatcher(
            queue: queue, accounts: Devices(devices), sender: sender, audit: AuditLog(), metrics: AppMetrics(), logger: Logger(label: "test"))
        dispatcher.maxConcurrent = 8
        let running = Task { try await dispatcher.run() }
        let expires = Date().addingTimeInterval(3600)
        let requester = RequesterInfo(ip: "203.0.113.7", userAgent: nil)
        queue.enqueue(.prompt(requestID: "a", userID: "ana", action: .passwordReset, expiresAt: expires, requester: requester))
        queue.enqueue(.prompt(requestID: "b", userID: "bob", action: .passwordReset, expiresAt: expires, requester: requester))
        // Bob's seven go while Ana's slow device still waits. Bounded only to turn a hang into a failure.
        for _ in 0..<500 where sender.state.withLock({ $0.delivered }) < 14 { try await Task.sleep(for: .milliseconds(10)) }
        let state = sender.state.withLock { $0 }
        #expect(state.delivered == 14)
        #expect(state.groups.map(\.size) == [8, 7])
        #expect(state.waiting.count == 1)
        #expect(state.most[.fcm].map { $0 <= 8 } == true)
        sender.release()
        for _ in 0..<500 where sender.state.withLock({ $0.delivered }) < 15 { try await Task.sleep(for: .milliseconds(10)) }
        #expect(sender.state.withLock { $0.delivered } == 15)
        running.cancel()
    }
}

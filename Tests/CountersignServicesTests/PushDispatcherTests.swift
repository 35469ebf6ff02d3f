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
}

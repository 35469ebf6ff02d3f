import CountersignCore
import CountersignHTTP
import CountersignPush
import CountersignRuntime
import CountersignStore
import FakeFCM
import Foundation
import NIOHTTP1
import TestSupport
import Testing

@testable import DaemonTestSupport

/// The daemon wired to FCM (a strict fake on 127.0.0.1) through its own configuration.
@Suite struct PushFlowTests {
    /// Waits until `condition` holds (pushes are sent after the HTTP answer, on purpose).
    /// The bound only turns a hang into a failure (the checks after it then fail).
    static func eventually(_ condition: () async -> Bool) async throws {
        let clock = ContinuousClock()
        let start = clock.now
        while !(await condition()) && clock.now - start < .seconds(60) { try await Task.sleep(for: .milliseconds(50)) }
    }

    @Test func promptsGoToPushDevicesOnlyAndResolutionsFollow() async throws {
        try await withTemporaryFolder { folder in
            try await FakeFCMServer.run(folder: folder) { fake, base, file in
                let configuration = TestDaemon.configuration(folder) { $0.push = PushConfiguration(serviceAccountFile: file, endpoint: base) }
                try await TestDaemon.run(configuration) { daemon in
                    try await daemon.createUser(Fixture.email, password: Fixture.password)
                    let (key, _) = try await daemon.login(Fixture.email, password: Fixture.password, device: "iPhone", fcmToken: "token-iphone")
                    _ = try await daemon.login(Fixture.email, password: Fixture.password, device: "iPad", fcmToken: "token-ipad")
                    let (deskKey, _) = try await daemon.login(Fixture.email, password: Fixture.password, device: "Desk", fcmToken: "unknown")
                    #expect(try await daemon.call(.GET, "/healthz")["push"] == "ok")

                    // trust.md: each device that joins is announced to the others, data only, naming no secret.
                    func added() -> [FakeFCM.Received] { fake.received.filter { $0.data["type"] == "device_added" } }
                    try await Self.eventually { added().count >= 3 }
                    #expect(added().map(\.token).sorted() == ["token-ipad", "token-iphone", "token-iphone"])
                    #expect(added().filter { $0.data["deviceName"] == "Desk" }.map(\.token).sorted() == ["token-ipad", "token-iphone"])
                    #expect(
                        added().allSatisfy { Set($0.data.keys) == ["type", "deviceName", "platform", "at"] && !$0.json.contains("notification") })
                    #expect(added().allSatisfy { !$0.json.contains(deskKey) && !$0.json.contains(key) })
                    #expect(try await daemon.waitForAudit(.deviceAdded) { $0.count >= 2 }.allSatisfy { $0.detail?.hasPrefix("route login") == true })

                    let (id, code) = try await daemon.initiate(Fixture.email, newPassword: "staple orbit lantern")
                    try await Self.eventually { fake.received.filter { $0.data["type"] == "approval_request" }.count >= 2 }
                    try await Task.sleep(for: .milliseconds(200))
                    let prompts = fake.received.filter { $0.data["type"] == "approval_request" }
                    #expect(prompts.count == 2)
                    #expect(Set(prompts.map(\.token)) == ["token-iphone", "token-ipad"])
                    #expect(prompts.allSatisfy { $0.data["requestId"] == id && $0.data["action"] == "password_reset" })
                    // No number code and no password in any push.
                    #expect(prompts.allSatisfy { !$0.json.contains("staple") && !$0.json.contains("numberCode") })
                    // Nor the code's value: no data value is it, and the words shown do not hold it.
                    let number = try #require(code)
                    #expect(prompts.allSatisfy { !$0.data.values.contains(number) })
                    for prompt in prompts {
                        let message = try #require(try JSONSerialization.jsonObject(with: Data(prompt.json.utf8)) as? [String: Any])
                        let notification = try #require((message["message"] as? [String: Any])?["notification"] as? [String: String])
                        let shown = [notification["title"], notification["body"]].compactMap { $0 }.joined(separator: " ")
                        #expect(!shown.isEmpty)
                        #expect(shown.range(of: "\\b\(number)\\b", options: .regularExpression) == nil, "\(shown)")
                    }
                    #expect(fake.rejections.isEmpty)
                    #expect(fake.exchanges == 1)

                    #expect(try await daemon.respond(id, apiKey: key, code: code).status == 200)
                    try await Self.eventually { fake.received.filter { $0.data["type"] == "approval_resolved" }.count >= 2 }
                    let notices = fake.received.filter { $0.data["type"] == "approval_resolved" }
                    #expect(Set(notices.map(\.token)) == ["token-iphone", "token-ipad"])
                    let resolvedData = notices.map(\.data)
                    #expect(resolvedData.allSatisfy { $0["status"] == "approved" && $0["requestId"] == id }, "\(resolvedData) \(id)")
                    #expect(fake.exchanges == 1)
                }
            }
        }
    }

    @Test func aWrongProjectDisablesNoDeviceAndHealthSaysAuthError() async throws {
        try await withTemporaryFolder { folder in
            try await FakeFCMServer.run(folder: folder) { fake, base, file in
                // The same key, but a project id the push service does not know: every send is a bare 404.
                var account = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: file))) as? [String: Any])
                account["project_id"] = "no-such-project"
                try JSONSerialization.data(withJSONObject: account).write(to: URL(fileURLWithPath: file))
                let configuration = TestDaemon.configuration(folder) { $0.push = PushConfiguration(serviceAccountFile: file, endpoint: base) }
                try await TestDaemon.run(configuration) { daemon in
                    let user = try await daemon.createUser(Fixture.email, password: Fixture.password)
                    _ = try await daemon.login(Fixture.email, password: Fixture.password, fcmToken: "token-fine")
                    _ = try await daemon.initiate(Fixture.email, newPassword: Fixture.newPassword)
                    try await Self.eventually { (try? await daemon.call(.GET, "/healthz"))?["push"] == "auth_error" }
                    #expect(try await daemon.call(.GET, "/healthz")["push"] == "auth_error")
                    #expect(try await daemon.server.store.devices(userID: user.id).allSatisfy(\.pushEnabled))
                    #expect(fake.received.isEmpty)
                }
            }
        }
    }

    @Test func aDeadTokenDisablesThatDeviceOnlyUntilANewToken() async throws {
        try await withTemporaryFolder { folder in
            try await FakeFCMServer.run(folder: folder) { fake, base, file in
                fake.script("token-gone", [.unregistered])
                let configuration = TestDaemon.configuration(folder) { $0.push = PushConfiguration(serviceAccountFile: file, endpoint: base) }
                try await TestDaemon.run(configuration) { daemon in
                    let user = try await daemon.createUser(Fixture.email, password: Fixture.password)
                    // "New" first: the notice that "Old" joined goes to "New" only, and the prompt is the first push "Old" gets.
                    _ = try await daemon.login(Fixture.email, password: Fixture.password, device: "New", fcmToken: "token-live")
                    let (goneKey, _) = try await daemon.login(Fixture.email, password: Fixture.password, device: "Old", fcmToken: "token-gone")
                    _ = try await daemon.initiate(Fixture.email, newPassword: "staple orbit lantern")
                    try await Self.eventually { (try? await daemon.server.store.devices(userID: user.id).contains { !$0.pushEnabled }) ?? false }
                    var devices = try await daemon.server.store.devices(userID: user.id)
                    #expect(devices.first { $0.name == "Old" }?.pushEnabled == false)
                    #expect(devices.first { $0.name == "New" }?.pushEnabled == true)

                    let count = fake.received.count
                    _ = try await daemon.initiate(Fixture.email, newPassword: "staple orbit lantern")
                    try await Task.sleep(for: .milliseconds(300))
                    #expect(!fake.received.dropFirst(count).contains { $0.token == "token-gone" })

                    // A new token revives it.
                    #expect(
                        try await daemon.call(.PUT, "/api/mobile/device/fcm-token", json: ["fcmToken": "token-fresh"], apiKey: goneKey).status == 200)
                    devices = try await daemon.server.store.devices(userID: user.id)
                    #expect(devices.first { $0.name == "Old" }?.pushEnabled == true)
                    let events = try await daemon.server.store.auditEvents(since: nil, email: Fixture.email, kind: .pushed, limit: 50)
                    #expect(events.contains { $0.detail?.contains("token_dead") == true })
                }
            }
        }
    }

    @Test func aFailingFCMDoesNotDelayTheRequester() async throws {
        try await withTemporaryFolder { folder in
            try await FakeFCMServer.run(folder: folder) { fake, base, file in
                fake.script("token-slow", [.unavailable(retryAfter: 120), .ok])
                let configuration = TestDaemon.configuration(folder) { $0.push = PushConfiguration(serviceAccountFile: file, endpoint: base) }
                try await TestDaemon.run(configuration) { daemon in
                    try await daemon.createUser(Fixture.email, password: Fixture.password)
                    _ = try await daemon.login(Fixture.email, password: Fixture.password, fcmToken: "token-slow")
                    // The retry waits 120 s (Retry-After); the answer does not (the client gives up after 25 s).
                    let answer = try await daemon.call(
                        .POST, "/api/mobile/auth/reset/phone/initiate", json: ["email": Fixture.email, "newPassword": "staple orbit lantern"],
                        timeout: .seconds(25))
                    #expect(answer.status == 200)
                    #expect(fake.received.filter { $0.answeredOK }.isEmpty)
                }
            }
        }
    }

    @Test func aBadServiceAccountStopsStartUpNamingTheField() async throws {
        try await withTemporaryFolder { folder in
            let file = folder.url.appendingPathComponent("sa.json").path
            try Data(#"{"type": "service_account", "project_id": "p"}"#.utf8).write(to: URL(fileURLWithPath: file))
            let configuration = TestDaemon.configuration(folder) { $0.push = PushConfiguration(serviceAccountFile: file) }
            do {
                _ = try await buildApplication(configuration: configuration, logger: LogCapture().logger())
                Issue.record("start-up went on with a bad service account")
            } catch let error as ServiceAccountError {
                #expect(error.description.contains("\"token_uri\"") || error.description.contains("\"private_key\""))
            }
            // An empty credential file means push off.
            try Data().write(to: URL(fileURLWithPath: file))
            let server = try await buildApplication(configuration: configuration, logger: LogCapture().logger())
            #expect(server.routes.contains("GET /healthz"))
        }
    }
}

extension PushFlowTests {
    /// http-api.md: an `approval_resolved` notice follows whenever a request
    /// leaves pending (denied, cancelled by its requester, expired), to the
    /// devices that were prompted.
    @Test func everyWayOutOfPendingSendsAResolutionNotice() async throws {
        @Sendable func resolutions(_ pushes: RecordingPushSender) -> [String: ApprovalState] {
            var found: [String: ApprovalState] = [:]
            for delivery in pushes.deliveries {
                if case .resolved(let id, _, let status) = delivery.job { found[id] = status }
            }
            return found
        }
        @Sendable func eventually(_ pushes: RecordingPushSender, count: Int) async throws -> [String: ApprovalState] {
            for _ in 0..<1200 where resolutions(pushes).count < count { try await Task.sleep(for: .milliseconds(50)) }
            return resolutions(pushes)
        }
        let pushes = RecordingPushSender()
        try await withTestDaemon(pushSender: pushes) { daemon in
            try await daemon.createUser(Fixture.email, password: Fixture.password)
            let (key, _) = try await daemon.login(Fixture.email, password: Fixture.password, fcmToken: "token-phone-123456")
            let denied = try await daemon.initiate(Fixture.email, newPassword: Fixture.newPassword)
            #expect(try await daemon.respond(denied.requestID, apiKey: key, decision: "deny", code: nil).status == 200)
            let cancelled = try await daemon.initiate(Fixture.email, newPassword: Fixture.newPassword)
            #expect(try await daemon.call(.POST, "/api/mobile/auth/reset/phone/cancel/\(cancelled.requestID)").status == 200)
            let found = try await eventually(pushes, count: 2)
            #expect(found[denied.requestID] == .denied)
            #expect(found[cancelled.requestID] == .cancelled)
        }
        let expiring = RecordingPushSender()
        let clock = ManualClock()
        try await withTestDaemon(pushSender: expiring, clock: clock) { daemon in
            try await daemon.createUser(Fixture.email, password: Fixture.password)
            _ = try await daemon.login(Fixture.email, password: Fixture.password, fcmToken: "token-phone-123456")
            let expired = try await daemon.initiate(Fixture.email, newPassword: Fixture.newPassword)
            clock.advance(60.1)
            #expect(try await eventually(expiring, count: 1)[expired.requestID] == .expired)
        }
    }
}

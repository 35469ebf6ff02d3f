import CountersignCore
import CountersignHTTP
import CountersignPush
import CountersignRuntime
import Foundation
import JWTKit
import NIOHTTP1
import TestSupport
import Testing

@testable import DaemonTestSupport

/// push-providers.md through the daemon: devices reached by Web Push and
/// APNs, checked by servers that are not ours (Web Push: PyPI's http_ece and
/// py_vapid; APNs: an HTTP/2 server that verifies the provider token).
@Suite struct PushProvidersTests {
    static let subject = "mailto:ops@example.com"
    static let keyID = "KEY1234567"
    static let teamID = "TEAM123456"

    static func webPushAddress(_ server: PushTestServer, _ name: String) -> [String: any Sendable] {
        ["provider": "webpush", "endpoint": "\(server.base)/push/\(name)", "p256dh": server.p256dh ?? "", "auth": server.auth ?? ""]
    }

    static func apnsAddress(_ token: String) -> [String: any Sendable] {
        ["provider": "apns", "token": token, "topic": "com.example.countersign", "environment": "sandbox"]
    }

    /// Logs a device in with a push address; returns its API key and id, and the login answer.
    static func login(
        _ daemon: TestDaemon, device: String, push: [String: any Sendable]
    ) async throws -> (apiKey: String, deviceID: String, answer: TestDaemon.Answer) {
        let answer = try await daemon.call(
            .POST, "/api/mobile/auth/login",
            json: ["email": Fixture.email, "password": Fixture.password, "deviceName": device, "platform": "android", "push": push])
        guard answer.status == 200, let key = answer["apiKey"], let id = (answer.json["device"] as? [String: any Sendable])?["id"] as? String else {
            throw TestFailure("login failed: \(answer.status) \(answer.text)")
        }
        return (key, id, answer)
    }

    static func webPushConfiguration(_ folder: TemporaryFolder, _ configuration: inout ServeConfiguration) {
        configuration.push.webPush = WebPushConfiguration(vapidKeyFile: folder.url.appendingPathComponent("vapid.pem").path, subject: subject)
        configuration.push.endpoints = PushEndpointPolicy(allowsPrivate: true)
    }

    @Test func aPromptReachesAWebPushSubscriptionEncryptedAndSignedWithTheDaemonsVAPIDKey() async throws {
        try await withTemporaryFolder { folder in
            let server = try await PushTestServer(.webPush, folder: folder.url)
            defer { server.stop() }
            let logs = LogCapture()
            let configuration = TestDaemon.configuration(folder) { Self.webPushConfiguration(folder, &$0) }
            try await TestDaemon.run(configuration, logs: logs) { daemon in
                try await daemon.createUser(Fixture.email, password: Fixture.password)
                let (key, _, answer) = try await Self.login(daemon, device: "Pixel", push: Self.webPushAddress(server, "ana-phone"))
                let offer = try #require(answer.json["push"] as? [String: any Sendable])
                #expect(offer["providers"] as? [String] == ["webpush"])
                let vapidKey = try #require(offer["vapidPublicKey"] as? String)
                let config = try await daemon.call(.GET, "/api/mobile/push/config", apiKey: key)
                #expect(config.json["providers"] as? [String] == ["webpush"])
                #expect(config["vapidPublicKey"] == vapidKey)
                #expect(try await daemon.call(.GET, "/api/mobile/push/config").status == 401)

                let (id, code) = try await daemon.initiate(Fixture.email, newPassword: "staple orbit lantern")
                let prompts = try await server.wait { $0.contains { $0.payload?["type"] == "approval_request" } }
                    .filter { $0.payload?["type"] == "approval_request" }
                let prompt = try #require(prompts.first)
                // Decrypted by http_ece with the subscription's private key and auth secret.
                #expect(prompt.decryptError == nil)
                let payload = try #require(prompt.payload)
                #expect(payload["requestId"] == id)
                #expect(payload["action"] == "password_reset")
                #expect(payload["title"] == "Approve password reset?")
                #expect(Set(payload.keys) == ["type", "requestId", "action", "expiresAt", "title", "body"])
                #expect(!payload.values.contains(try #require(code)))
                #expect(prompt.headers["content-encoding"] == "aes128gcm")
                #expect(prompt.headers["urgency"] == "high")
                #expect(prompt.headers["topic"] == ApprovalRequest.logReference(of: id))
                #expect((1...60).contains(Int(prompt.headers["ttl"] ?? "") ?? 0))
                // VAPID: py_vapid verifies the signature; aud is this origin, exp within 24 h, sub ours.
                let vapid = try #require(prompt.vapid)
                #expect(vapid.valid, "\(vapid)")
                #expect(vapid.aud == server.base)
                #expect(vapid.sub == Self.subject)
                #expect(vapid.k == vapidKey)

                // The device shows its provider and the endpoint's last 6 characters only.
                let device = try await daemon.call(.GET, "/api/mobile/device", apiKey: key)
                let push = try #require(device.json["push"] as? [String: any Sendable])
                #expect(push["provider"] as? String == "webpush")
                #expect(push["token"] as? String == "-phone")
                #expect(!device.text.contains("/push/"))
                #expect(try await daemon.call(.GET, "/healthz")["push"] == "ok")
                let pushed = try await daemon.waitForAudit(.pushed) { $0.contains { $0.detail == "approval_request: sent (webpush)" } }
                #expect(pushed.contains { $0.detail == "approval_request: sent (webpush)" })
                #expect(try await daemon.metricsText().contains(#"provider="webpush""#))
                #expect(!logs.text.contains("/push/ana-phone"))
                #expect(!logs.text.contains(try #require(server.auth)))
            }
        }
    }

    @Test func aGoneSubscriptionIsDisabledABusyOneRetriedAndATooLargeAnswerNotRetried() async throws {
        try await withTemporaryFolder { folder in
            let server = try await PushTestServer(.webPush, folder: folder.url)
            defer { server.stop() }
            let configuration = TestDaemon.configuration(folder) { Self.webPushConfiguration(folder, &$0) }
            try await TestDaemon.run(configuration) { daemon in
                let user = try await daemon.createUser(Fixture.email, password: Fixture.password)
                // The dead one signs in last: the others' `device_added` notices do not reach it.
                _ = try await Self.login(daemon, device: "Busy", push: Self.webPushAddress(server, "busy-1"))
                _ = try await Self.login(daemon, device: "Big", push: Self.webPushAddress(server, "big-1"))
                let (_, goneID, _) = try await Self.login(daemon, device: "Old", push: Self.webPushAddress(server, "gone-1"))
                let (id, _) = try await daemon.initiate(Fixture.email, newPassword: "staple orbit lantern")
                func prompts(_ name: String, _ all: [PushTestServer.Received], of request: String) -> [PushTestServer.Received] {
                    all.filter { $0.path.hasSuffix("/\(name)") && $0.payload?["type"] == "approval_request" && $0.payload?["requestId"] == request }
                }
                let all = try await server.wait {
                    prompts("busy-1", $0, of: id).contains { $0.status == 201 } && !prompts("gone-1", $0, of: id).isEmpty
                        && !prompts("big-1", $0, of: id).isEmpty
                }
                // 429 with Retry-After: sent again, and taken.
                let busy = prompts("busy-1", all, of: id)
                #expect(busy.map(\.status) == [429, 201])
                // `Retry-After: 1` was waited out (a lower bound: a busy machine only makes it longer).
                #expect((busy.last?.at ?? 0) - (busy.first?.at ?? 0) >= 0.9)
                // 410: not retried. A try made again after an answer that came
                // later than the 10 s request timeout (under stress-ng) is a
                // transport failure's retry, and is answered 410 again.
                let gone = prompts("gone-1", all, of: id).map(\.status)
                #expect(!gone.isEmpty && gone.allSatisfy { $0 == 410 }, "\(gone)")
                // 410: the device's push is off.
                func goneEnabled() async -> Bool? {
                    try? await daemon.server.store.devices(userID: user.id).first { $0.id == goneID }?.pushEnabled
                }
                try await PushFlowTests.eventually { await goneEnabled() == false }
                #expect(await goneEnabled() == false)
                let audited = try await daemon.waitForAudit(.pushed) { events in
                    ["approval_request: rejected (webpush)", "approval_request: token_dead (webpush)"].allSatisfy { detail in
                        events.contains { $0.detail == detail }
                    }
                }
                #expect(audited.contains { $0.detail == "approval_request: rejected (webpush)" })
                #expect(audited.contains { $0.detail == "approval_request: token_dead (webpush)" })
                // 413 is a bug of ours: audited, never retried.
                try await Task.sleep(for: .milliseconds(300))
                let big = prompts("big-1", try server.received(), of: id).map(\.status)
                #expect(!big.isEmpty && big.allSatisfy { $0 == 413 }, "\(big)")
                // A dead subscription gets nothing more until the device sends a new one.
                let before = try server.received().filter { $0.path.hasSuffix("/gone-1") }.count
                let (next, _) = try await daemon.initiate(Fixture.email, newPassword: "another fine password")
                _ = try await server.wait { prompts("busy-1", $0, of: next).contains { $0.status == 201 } }
                #expect(try server.received().filter { $0.path.hasSuffix("/gone-1") }.count == before)
            }
        }
    }

    /// An endpoint that redirects is not followed: the redirect would take the POST past the address checks.
    @Test func aRedirectingEndpointIsNotFollowed() async throws {
        try await withTemporaryFolder { folder in
            let server = try await PushTestServer(.webPush, folder: folder.url)
            defer { server.stop() }
            let configuration = TestDaemon.configuration(folder) { Self.webPushConfiguration(folder, &$0) }
            try await TestDaemon.run(configuration) { daemon in
                try await daemon.createUser(Fixture.email, password: Fixture.password)
                _ = try await Self.login(daemon, device: "Pixel", push: Self.webPushAddress(server, "redirect-1"))
                let (id, _) = try await daemon.initiate(Fixture.email, newPassword: "staple orbit lantern")
                let audited = try await daemon.waitForAudit(.pushed) { $0.contains { $0.detail == "approval_request: rejected (webpush)" } }
                #expect(audited.contains { $0.detail == "approval_request: rejected (webpush)" })
                let all = try server.received()
                // Each try was answered 307 and none followed; a try whose answer came late on a loaded
                // machine is made again, to the same address.
                let statuses = all.filter { $0.payload?["requestId"] == id }.map(\.status)
                #expect(!statuses.isEmpty && statuses.allSatisfy { $0 == 307 }, "\(statuses)")
                #expect(!all.contains { $0.path.contains("redirected") })
            }
        }
    }

    /// The enroll body takes a push address too, and its answer carries the push offer.
    @Test func anEnrolledDeviceGivesItsPushAddressAndGetsTheOffer() async throws {
        try await withTemporaryFolder { folder in
            let server = try await PushTestServer(.webPush, folder: folder.url)
            defer { server.stop() }
            let configuration = TestDaemon.configuration(folder) { Self.webPushConfiguration(folder, &$0) }
            try await TestDaemon.run(configuration) { daemon in
                let acme = try await daemon.addIntegration("Acme")
                #expect(try await daemon.v1(.POST, "/v1/users", key: acme.key, json: ["email": "bob@example.com"]).status == 201)
                let issued = try await daemon.v1(.POST, "/v1/users/bob@example.com/enrollments", key: acme.key)
                let code = try #require(issued["enrollmentCode"])
                let enrolled = try await daemon.call(
                    .POST, "/api/mobile/auth/enroll",
                    json: ["enrollmentCode": code, "deviceName": "Fairphone", "platform": "android", "push": Self.webPushAddress(server, "bob")])
                #expect(enrolled.status == 200, "\(enrolled.text)")
                let offer = try #require(enrolled.json["push"] as? [String: any Sendable])
                #expect(offer["providers"] as? [String] == ["webpush"])
                #expect((offer["vapidPublicKey"] as? String)?.count == 87)
                let key = try #require(enrolled["apiKey"])
                let device = try await daemon.call(.GET, "/api/mobile/device", apiKey: key)
                #expect((device.json["push"] as? [String: any Sendable])?["provider"] as? String == "webpush")
                #expect(device.json["mayApproveResets"] as? Bool == false)
            }
        }
    }

    @Test func apnsGetsTheContractsRequestOverHTTP2AndItsAnswersAreHonoured() async throws {
        try await withTemporaryFolder { folder in
            let keyFile = folder.url.appendingPathComponent("AuthKey.p8").path
            try Data(ES256PrivateKey().pemRepresentation.utf8).write(to: URL(fileURLWithPath: keyFile))
            let server = try await PushTestServer(.apns, folder: folder.url, apnsKeyFile: keyFile, keyID: Self.keyID, teamID: Self.teamID)
            defer { server.stop() }
            let logs = LogCapture()
            let configuration = TestDaemon.configuration(folder) {
                $0.push.apns = APNsConfiguration(keyFile: keyFile, keyID: Self.keyID, teamID: Self.teamID, url: server.base, caFile: server.caFile)
                Self.webPushConfiguration(folder, &$0)
            }
            try await TestDaemon.run(configuration, logs: logs) { daemon in
                let user = try await daemon.createUser(Fixture.email, password: Fixture.password)
                let fine = String(repeating: "a1", count: 32)
                let expired = "ee" + String(repeating: "b2", count: 31)
                let dead = "dead" + String(repeating: "c3", count: 30)
                let flaky = "50" + String(repeating: "d4", count: 31)
                let busy = "42" + String(repeating: "e5", count: 31)
                let malformed = "bad0" + String(repeating: "f6", count: 30)
                _ = try await Self.login(daemon, device: "iPhone", push: Self.apnsAddress(fine))
                _ = try await Self.login(daemon, device: "iPad", push: Self.apnsAddress(expired))
                _ = try await Self.login(daemon, device: "Mac", push: Self.apnsAddress(flaky))
                _ = try await Self.login(daemon, device: "Watch", push: Self.apnsAddress(busy))
                // The devices to be found dead sign in with good tokens, and move to their own once every
                // sign-in's `device_added` notices are out: a notice must not find them dead before the prompt does.
                let (malformedKey, malformedID, _) = try await Self.login(
                    daemon, device: "Old iPad", push: Self.apnsAddress(String(repeating: "a2", count: 32)))
                let (deadKey, deadID, _) = try await Self.login(
                    daemon, device: "Old iPhone", push: Self.apnsAddress(String(repeating: "a3", count: 32)))
                // Six sign-ins tell the devices before them: 15 notices, each answered 200 in the end.
                _ = try await server.wait { all in
                    all.filter { ($0.body?["type"] as? String) == "device_added" && $0.status == 200 }.count >= 15
                }
                for (key, token) in [(malformedKey, malformed), (deadKey, dead)] {
                    #expect(try await daemon.call(.PUT, "/api/mobile/device/push", json: Self.apnsAddress(token), apiKey: key).status == 200)
                }
                let (id, _) = try await daemon.initiate(Fixture.email, newPassword: "staple orbit lantern")
                let expiresAt = try #require(try await daemon.server.store.request(id: id)?.expiresAt)
                func prompts(_ token: String, _ all: [PushTestServer.Received]) -> [PushTestServer.Received] {
                    all.filter {
                        $0.path == "/3/device/\(token)" && ($0.body?["requestId"] as? String) == id
                            && ($0.body?["type"] as? String) == "approval_request"
                    }
                }
                let all = try await server.wait {
                    !prompts(fine, $0).isEmpty && prompts(expired, $0).count >= 2 && !prompts(dead, $0).isEmpty && prompts(flaky, $0).count >= 2
                        && prompts(busy, $0).count >= 2 && !prompts(malformed, $0).isEmpty
                }
                let sent = try #require(prompts(fine, all).first)
                #expect(sent.status == 200)
                #expect(sent.httpVersion == "2")
                #expect(sent.headers["apns-topic"] == "com.example.countersign")
                #expect(sent.headers["apns-push-type"] == "alert")
                #expect(sent.headers["apns-priority"] == "10")
                #expect(sent.headers["apns-expiration"] == String(Int(expiresAt.timeIntervalSince1970)))
                #expect(sent.headers["apns-collapse-id"] == "approval-" + id.prefix(40))
                let jwt = try #require(sent.jwt)
                #expect(jwt.valid, "\(jwt)")
                #expect(jwt.kid == Self.keyID && jwt.iss == Self.teamID)
                let aps = try #require(sent.body?["aps"] as? [String: Any])
                #expect((aps["alert"] as? [String: String])?["title"] == "Approve password reset?")
                #expect(aps["category"] as? String == "APPROVAL_REQUEST")
                #expect(aps["interruption-level"] as? String == "time-sensitive")
                #expect(sent.body?["type"] as? String == "approval_request")
                // ExpiredProviderToken: one new provider token, one retry.
                let twice = prompts(expired, all)
                #expect(twice.map(\.status) == [403, 200])
                #expect(twice.map(\.reason) == ["ExpiredProviderToken", nil])
                #expect(twice[0].jwt?.token != twice[1].jwt?.token)
                // 500: retried with back-off.
                #expect(prompts(flaky, all).map(\.status) == [500, 200])
                // 429: retried no sooner than Retry-After (a lower bound: a busy machine only makes it longer).
                let waited = prompts(busy, all)
                #expect(waited.map(\.status) == [429, 200])
                #expect((waited.last?.at ?? 0) - (waited.first?.at ?? 0) >= 0.9)
                // 410 Unregistered and 400 BadDeviceToken: the device's push is off.
                #expect(prompts(dead, all).map(\.status) == [410])
                #expect(prompts(malformed, all).map(\.status) == [400])
                try await PushFlowTests.eventually {
                    (try? await daemon.server.store.devices(userID: user.id).first { $0.id == malformedID }?.pushEnabled) == false
                }
                #expect(try await daemon.server.store.devices(userID: user.id).first { $0.id == malformedID }?.pushEnabled == false)
                try await PushFlowTests.eventually {
                    (try? await daemon.server.store.devices(userID: user.id).first { $0.id == deadID }?.pushEnabled) == false
                }
                #expect(try await daemon.server.store.devices(userID: user.id).first { $0.id == deadID }?.pushEnabled == false)
                // Two providers configured: /healthz shows each.
                let health = try await daemon.call(.GET, "/healthz")
                #expect(health.json["push"] as? [String: String] == ["fcm": "disabled", "apns": "ok", "webpush": "ok"])
                #expect(!logs.text.contains(fine) && !logs.text.contains(dead))
                #expect(logs.text.contains(String(dead.suffix(6))))
            }
        }
    }

    @Test func aWrongAPNsKeyIsAnAuthErrorAndDisablesNothing() async throws {
        try await withTemporaryFolder { folder in
            let keyFile = folder.url.appendingPathComponent("AuthKey.p8").path
            let otherKey = folder.url.appendingPathComponent("Other.p8").path
            try Data(ES256PrivateKey().pemRepresentation.utf8).write(to: URL(fileURLWithPath: keyFile))
            try Data(ES256PrivateKey().pemRepresentation.utf8).write(to: URL(fileURLWithPath: otherKey))
            // The server knows another key than the daemon signs with.
            let server = try await PushTestServer(.apns, folder: folder.url, apnsKeyFile: otherKey, keyID: Self.keyID, teamID: Self.teamID)
            defer { server.stop() }
            let configuration = TestDaemon.configuration(folder) {
                $0.push.apns = APNsConfiguration(keyFile: keyFile, keyID: Self.keyID, teamID: Self.teamID, url: server.base, caFile: server.caFile)
            }
            try await TestDaemon.run(configuration) { daemon in
                let user = try await daemon.createUser(Fixture.email, password: Fixture.password)
                _ = try await Self.login(daemon, device: "iPhone", push: Self.apnsAddress(String(repeating: "a1", count: 32)))
                _ = try await daemon.initiate(Fixture.email, newPassword: "staple orbit lantern")
                let all = try await server.wait { $0.contains { $0.body?["type"] as? String == "approval_request" } }
                #expect(all.filter { $0.body?["type"] as? String == "approval_request" }.map(\.reason) == ["InvalidProviderToken"])
                try await PushFlowTests.eventually { (try? await daemon.call(.GET, "/healthz")["push"]) == "auth_error" }
                #expect(try await daemon.call(.GET, "/healthz")["push"] == "auth_error")
                #expect(try await daemon.server.store.devices(userID: user.id).allSatisfy(\.pushEnabled))
            }
        }
    }

    /// Bad input → 400 naming the field, nothing stored.
    @Test func aBadPushAddressIsRefusedNamingTheFieldAndNothingIsStored() async throws {
        try await withTestDaemon { daemon in
            let user = try await daemon.createUser(Fixture.email, password: Fixture.password)
            let (key, _) = try await daemon.login(Fixture.email, password: Fixture.password, fcmToken: "fcm-token-123456")
            let goodKey = SecureToken.base64URL(P256PublicKeyFixture.point)
            let auth = SecureToken.base64URL(Data(repeating: 9, count: 16))
            let cases: [([String: any Sendable], String)] = [
                (["provider": "apns", "token": "not-hex-" + String(repeating: "a", count: 60), "topic": "com.example.app"], "token"),
                (["provider": "apns", "token": String(repeating: "a1", count: 32)], "topic"),
                (["provider": "apns", "token": String(repeating: "a1", count: 32), "topic": "com.example.app", "environment": "dev"], "environment"),
                (["provider": "webpush", "endpoint": "https://127.0.0.1/push", "p256dh": goodKey, "auth": auth], "endpoint"),
                (["provider": "webpush", "endpoint": "https://169.254.169.254/x", "p256dh": goodKey, "auth": auth], "endpoint"),
                (["provider": "webpush", "endpoint": "http://push.example.net/x", "p256dh": goodKey, "auth": auth], "endpoint"),
                (
                    [
                        "provider": "webpush", "endpoint": "https://push.example.net/x", "p256dh": SecureToken.base64URL(Data(count: 65)),
                        "auth": auth,
                    ], "p256dh"
                ),
                (
                    [
                        "provider": "webpush", "endpoint": "https://push.example.net/x", "p256dh": goodKey,
                        "auth": SecureToken.base64URL(Data(count: 15)),
                    ], "auth"
                ),
                (["provider": "webpush", "endpoint": "https://push.example.net/x", "p256dh": goodKey], "auth"),
                (["provider": "pigeon", "token": "x"], "provider"),
                (["provider": "fcm"], "token"),
            ]
            for (body, field) in cases {
                let answer = try await daemon.call(.PUT, "/api/mobile/device/push", json: body, apiKey: key)
                #expect(answer.status == 400, "\(body)")
                #expect(answer["error"] == "invalid_request")
                #expect(answer["message"]?.contains("`\(field)`") == true, "\(answer.text)")
            }
            #expect(try await daemon.server.store.devices(userID: user.id).map { $0.push } == [.fcm("fcm-token-123456")])
            // In a login body the field is named under `push`, and no device is made.
            let login = try await daemon.call(
                .POST, "/api/mobile/auth/login",
                json: ["email": Fixture.email, "password": Fixture.password, "deviceName": "X", "platform": "iOS", "push": cases[0].0])
            #expect(login.status == 400)
            #expect(login["message"]?.contains("`push.token`") == true)
            #expect(try await daemon.server.store.devices(userID: user.id).count == 1)
            // A good address replaces the FCM token; fcm-token still works and means FCM.
            let apns = String(repeating: "A1", count: 32)
            let set = try await daemon.call(.PUT, "/api/mobile/device/push", json: Self.apnsAddress(apns), apiKey: key)
            #expect(set.status == 200)
            #expect(
                try await daemon.server.store.devices(userID: user.id).map { $0.push }
                    == [.apns(token: apns.lowercased(), topic: "com.example.countersign", environment: .sandbox)])
            #expect(try await daemon.call(.PUT, "/api/mobile/device/fcm-token", json: ["fcmToken": "fcm-again-000001"], apiKey: key).status == 200)
            #expect(try await daemon.server.store.devices(userID: user.id).map { $0.push } == [.fcm("fcm-again-000001")])
            #expect(try await daemon.call(.PUT, "/api/mobile/device/push", json: ["provider": "fcm", "token": ""], apiKey: key).status == 200)
            #expect(try await daemon.server.store.devices(userID: user.id).map { $0.push } == [nil])
        }
    }
}

/// A valid uncompressed P-256 point.
enum P256PublicKeyFixture {
    static let point: Data = {
        var bytes: [UInt8] = [0x04]
        // The generator point G of P-256 (SEC 2): on the curve, whoever's key it is.
        bytes += hex("6B17D1F2E12C4247F8BCE6E563A440F277037D812DEB33A0F4A13945D898C296")
        bytes += hex("4FE342E2FE1A7F9B8EE7EB4A7C0F9E162BCE33576B315ECECBB6406837BF51F5")
        return Data(bytes)
    }()

    static func hex(_ text: String) -> [UInt8] {
        var bytes: [UInt8] = []
        var index = text.startIndex
        while index < text.endIndex {
            let next = text.index(index, offsetBy: 2)
            bytes.append(UInt8(text[index..<next], radix: 16)!)
            index = next
        }
        return bytes
    }
}

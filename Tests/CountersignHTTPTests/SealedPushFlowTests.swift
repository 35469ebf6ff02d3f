import CountersignCore
import CountersignDevice
import CountersignHTTP
import CountersignPush
import CountersignRuntime
import CountersignWire
import Crypto
import FakeFCM
import Foundation
import JWTKit
import NIOHTTP1
import TestSupport
import Testing

@testable import DaemonTestSupport

/// sealed-push.md through the daemon: a device's sealing key registered (login, enroll,
/// `PUT device/push`), shown as its thumbprint, and the pushes the fake FCM and the APNs
/// test server receive, opened by pyhpke.
@Suite struct SealedPushFlowTests {
    static func sealKey(_ key: P256.KeyAgreement.PrivateKey) -> String { SecureToken.base64URL(key.publicKey.x963Representation) }

    static func login(_ daemon: TestDaemon, device: String, extra: [String: any Sendable]) async throws -> TestDaemon.Answer {
        var body: [String: any Sendable] = ["email": Fixture.email, "password": Fixture.password, "deviceName": device, "platform": "android"]
        body.merge(extra) { $1 }
        return try await daemon.call(.POST, "/api/mobile/auth/login", json: body)
    }

    /// The other direction: a push sealed by a sender no one here wrote (pyhpke, from the
    /// contract's parameters alone) is opened by the device library to its words; bound to its
    /// request, refused with another request's id, another key, or a byte changed.
    @Test func thePhonesLibraryOpensAPushThatPyHPKESealed() async throws {
        let device = P256.KeyAgreement.PrivateKey()
        let sealKey = Base64URL.encode(device.publicKey.x963Representation)
        let requestID = "AbCdEfGhIjKlMnOpQrStUv"
        let words =
            #"{"type":"approval_request","requestId":"AbCdEfGhIjKlMnOpQrStUv","action":"login","title":"Sign in to Acme","body":"Firefox on Linux","integration":"Acme Admin","expiresAt":"2027-01-15T08:01:00.000Z"}"#
        let sealed = try await PyHPKE.seal(words, to: sealKey, aad: requestID)
        let push = ["type": "approval_request", "requestId": requestID, "sealed": sealed, "v": "1"]

        let notice = try #require(DeviceNotice(sealedPushData: push, sealKey: device, sealedOnly: true))
        guard case .approvalRequest(let prompt) = notice else {
            Issue.record("not a prompt: \(notice)")
            return
        }
        #expect(prompt.requestID == requestID && prompt.title == "Sign in to Acme" && prompt.body == "Firefox on Linux")
        #expect(prompt.integration == "Acme Admin")

        // Bound to its request (the aad and the routed id), its key, and every byte.
        var elsewhere = push
        elsewhere["requestId"] = "ZzZzZzZzZzZzZzZzZzZzZz"
        #expect(DeviceNotice(sealedPushData: elsewhere, sealKey: device) == nil)
        #expect(DeviceNotice(sealedPushData: push, sealKey: P256.KeyAgreement.PrivateKey()) == nil)
        var altered = push
        // One character of the ciphertext (past the 87 of the encapsulated key), all six of its bits in use.
        var characters = Array(sealed)
        characters[100] = characters[100] == "A" ? "B" : "A"
        altered["sealed"] = String(characters)
        #expect(DeviceNotice(sealedPushData: altered, sealKey: device) == nil)
    }

    @Test func aSealKeyIsCheckedStoredShownAsAThumbprintAndChangedOnlyWhenSent() async throws {
        try await withTestDaemon { daemon in
            let user = try await daemon.createUser(Fixture.email, password: Fixture.password)
            // Malformed, or not on the curve: 400 naming the field, and no device.
            var offCurve = P256.KeyAgreement.PrivateKey().publicKey.x963Representation
            offCurve[64] ^= 0x01
            for (bad, words) in [("AAAA", "must be base64url"), (SecureToken.base64URL(offCurve), "not a point on the P-256 curve")] {
                let refused = try await Self.login(daemon, device: "Phone", extra: ["sealKey": bad, "fcmToken": "tok-1"])
                #expect(refused.status == 400, "\(refused.text)")
                #expect(refused["message"]?.contains("`sealKey`") == true && refused["message"]?.contains(words) == true, "\(refused.text)")
            }
            let notString = try await Self.login(daemon, device: "Phone", extra: ["sealKey": 42])
            #expect(notString.status == 400, "\(notString.text)")
            // In `push` it would be ignored, and the app would believe its prompts sealed: refused, naming where it goes.
            let nested = try await Self.login(
                daemon, device: "Phone",
                extra: [
                    "push": ["provider": "fcm", "token": "tok-1", "sealKey": Self.sealKey(P256.KeyAgreement.PrivateKey())] as [String: any Sendable]
                ])
            #expect(nested.status == 400, "\(nested.text)")
            #expect(nested["message"]?.contains("`push.sealKey`") == true && nested["message"]?.contains("beside `push`") == true, "\(nested.text)")
            #expect(try await daemon.server.store.devices(userID: user.id).isEmpty, "nothing stored")

            let first = P256.KeyAgreement.PrivateKey()
            let login = try await Self.login(daemon, device: "Phone", extra: ["sealKey": Self.sealKey(first), "fcmToken": "tok-1"])
            #expect(login.status == 200, "\(login.text)")
            let apiKey = try #require(login["apiKey"])
            func shown() async throws -> TestDaemon.Answer { try await daemon.call(.GET, "/api/mobile/device", apiKey: apiKey) }
            let thumbprint = SealKey(publicKey: first.publicKey).thumbprint
            #expect(try await shown()["sealKey"] == thumbprint)
            #expect(try await shown().text.contains(Self.sealKey(first)) == false, "only the thumbprint is shown")

            // A new address without sealKey keeps it; a malformed one changes neither; null removes it.
            #expect(
                try await daemon.call(.PUT, "/api/mobile/device/push", json: ["provider": "fcm", "token": "tok-2"], apiKey: apiKey).status == 200)
            #expect(try await shown()["sealKey"] == thumbprint)
            let malformed = try await daemon.call(
                .PUT, "/api/mobile/device/push", json: ["provider": "fcm", "token": "tok-3", "sealKey": "AAAA"], apiKey: apiKey)
            #expect(malformed.status == 400 && malformed["message"]?.contains("`sealKey`") == true, "\(malformed.text)")
            let push = try #require(try await shown().json["push"] as? [String: any Sendable])
            #expect(push["token"] as? String == "tok-2", "nothing written")
            #expect(try await shown()["sealKey"] == thumbprint)
            let second = P256.KeyAgreement.PrivateKey()
            #expect(
                try await daemon.call(
                    .PUT, "/api/mobile/device/push", json: ["provider": "fcm", "token": "tok-2", "sealKey": Self.sealKey(second)], apiKey: apiKey
                ).status == 200)
            #expect(try await shown()["sealKey"] == SealKey(publicKey: second.publicKey).thumbprint)
            let removed = try await daemon.call(
                .PUT, "/api/mobile/device/push", rawBody: Array(#"{"provider": "fcm", "token": "tok-2", "sealKey": null}"#.utf8), apiKey: apiKey)
            #expect(removed.status == 200, "\(removed.text)")
            let afterRemoval = try await shown()
            #expect(afterRemoval.json["sealKey"] is NSNull, "\(afterRemoval.text)")

            // A `null` inside `push` says nothing (a client that writes every member): taken, no key.
            let nullInPush = try await Self.login(
                daemon, device: "Tablet", extra: ["push": ["provider": "fcm", "token": "tok-4", "sealKey": NSNull()] as [String: any Sendable]])
            #expect(nullInPush.status == 200, "\(nullInPush.text)")
            let tablet = try await daemon.call(.GET, "/api/mobile/device", apiKey: try #require(nullInPush["apiKey"]))
            #expect(tablet.json["sealKey"] is NSNull, "\(tablet.text)")
        }
    }

    /// `--sealed-push required`: the device with a key gets sealed data messages pyhpke opens to what a
    /// readable push would say; the one without gets the type and request alone. Nothing of the user in either.
    @Test func fakeFCMReceivesSealedPromptsThatPyHPKEOpensAndBarePromptsUnderRequired() async throws {
        try await withTemporaryFolder { folder in
            try await FakeFCMServer.run(folder: folder) { fake, base, file in
                let configuration = TestDaemon.configuration(folder) {
                    $0.push = PushConfiguration(serviceAccountFile: file, endpoint: base)
                    $0.push.sealedPush = .required
                }
                try await TestDaemon.run(configuration) { daemon in
                    try await daemon.createUser(Fixture.email, password: Fixture.password)
                    // The sealing key made as an app no one here wrote would make it (Python's cryptography).
                    let made = try await PyHPKE.newKey()
                    let device = try P256.KeyAgreement.PrivateKey(pemRepresentation: made.privateKeyPEM)
                    #expect(
                        try await Self.login(daemon, device: "Sealed", extra: ["sealKey": made.sealKey, "fcmToken": "token-sealed"]).status
                            == 200)
                    #expect(try await Self.login(daemon, device: "Bare", extra: ["fcmToken": "token-bare"]).status == 200)

                    let (id, code) = try await daemon.initiate(Fixture.email, newPassword: "staple orbit lantern")
                    try await PushFlowTests.eventually { fake.received.filter { $0.data["type"] == "approval_request" }.count >= 2 }
                    let prompts = fake.received.filter { $0.data["type"] == "approval_request" }
                    let sealed = try #require(prompts.first { $0.token == "token-sealed" })
                    let bare = try #require(prompts.first { $0.token == "token-bare" })
                    #expect(Set(sealed.data.keys) == ["type", "requestId", "sealed", "v"])
                    #expect(bare.data == ["type": "approval_request", "requestId": id])
                    // The device library reads the bare one as "a request waits: read it".
                    #expect(DeviceNotice(pushData: bare.data) == .approvalWaiting(requestID: id))
                    for prompt in [sealed, bare] {
                        #expect(!prompt.json.contains("\"notification\""), "a data message: \(prompt.json)")
                        #expect(!prompt.json.contains(Fixture.email) && !prompt.json.contains("requested from") && !prompt.json.contains("reset"))
                        // The number code is in no readable value (APNs' priority header, "10", is not a code: a code of 10 met it).
                        let readable = prompt.json.replacingOccurrences(of: "\"apns-priority\":\"10\"", with: "")
                        if let code { #expect(!readable.contains("\"\(code)\"")) }
                    }
                    let sealedText = try #require(sealed.data["sealed"])
                    let opened = try #require(try await PyHPKE.open(sealedText, privateKeyPEM: device.pemRepresentation, aad: id), "not opened")
                    let payload = try #require(try JSONSerialization.jsonObject(with: Data(opened.utf8)) as? [String: String])
                    #expect(payload["type"] == "approval_request" && payload["requestId"] == id && payload["action"] == "password_reset")
                    #expect(payload["title"] == "Approve password reset?", "\(payload)")
                    #expect(payload["body"]?.hasPrefix("A password reset was requested from ") == true, "\(payload)")
                    #expect(payload["numberCode"] == nil)
                    // The device library opens it to the notice a readable push gives.
                    let notice = try #require(DeviceNotice(sealedPushData: sealed.data, sealKey: device))
                    guard case .approvalRequest(let prompt) = notice else {
                        Issue.record("not a prompt: \(notice)")
                        return
                    }
                    #expect(prompt.requestID == id && prompt.action == "password_reset" && prompt.title == payload["title"])
                    #expect(prompt.body == payload["body"])
                    #expect(DeviceNotice(sealedPushData: sealed.data, sealKey: P256.KeyAgreement.PrivateKey()) == nil, "another key opens nothing")
                }
            }
        }
    }

    @Test func theAPNsTestServerReceivesASealedPromptWithAGenericAlert() async throws {
        try await withTemporaryFolder { folder in
            let keyFile = folder.url.appendingPathComponent("AuthKey.p8").path
            try Data(ES256PrivateKey().pemRepresentation.utf8).write(to: URL(fileURLWithPath: keyFile))
            let server = try await PushTestServer(
                .apns, folder: folder.url, apnsKeyFile: keyFile, keyID: PushProvidersTests.keyID, teamID: PushProvidersTests.teamID)
            defer { server.stop() }
            let configuration = TestDaemon.configuration(folder) {
                $0.push.apns = APNsConfiguration(
                    keyFile: keyFile, keyID: PushProvidersTests.keyID, teamID: PushProvidersTests.teamID, url: server.base, caFile: server.caFile)
            }
            try await TestDaemon.run(configuration) { daemon in
                try await daemon.createUser(Fixture.email, password: Fixture.password)
                let device = P256.KeyAgreement.PrivateKey()
                let token = String(repeating: "a1", count: 32)
                let answer = try await Self.login(
                    daemon, device: "iPhone", extra: ["sealKey": Self.sealKey(device), "push": PushProvidersTests.apnsAddress(token)])
                #expect(answer.status == 200, "\(answer.text)")
                let (id, _) = try await daemon.initiate(Fixture.email, newPassword: "staple orbit lantern")
                let received = try await server.wait { all in all.contains { ($0.body?["type"] as? String) == "approval_request" } }
                let prompt = try #require(received.first { ($0.body?["type"] as? String) == "approval_request" })
                let body = try #require(prompt.body)
                #expect(Set(body.keys) == ["aps", "type", "requestId", "sealed", "v"])
                let aps = try #require(body["aps"] as? [String: Any])
                #expect(
                    aps["alert"] as? [String: String] == [
                        "title": "Approval request", "body": "Open to see it.", "loc-key": "COUNTERSIGN_APPROVAL_REQUEST",
                    ])
                #expect(aps["mutable-content"] as? Int == 1)
                let text = try #require(prompt.bodyText)
                #expect(!text.contains(Fixture.email) && !text.contains("requested from") && !text.contains("reset"), "\(text)")
                let sealedText = try #require(body["sealed"] as? String)
                let opened = try #require(try await PyHPKE.open(sealedText, privateKeyPEM: device.pemRepresentation, aad: id), "not opened")
                #expect(opened.contains("\"action\":\"password_reset\""), "\(opened)")
            }
        }
    }
}

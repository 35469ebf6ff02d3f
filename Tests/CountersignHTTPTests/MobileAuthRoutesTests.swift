import CountersignCore
import CountersignHTTP
import CountersignRuntime
import CountersignStore
import Foundation
import NIOHTTP1
import TestSupport
import Testing

@testable import DaemonTestSupport

@Suite struct MobileAuthRoutesTests {
    @Test func loginRegistersADeviceAndReturnsItsKeyOnce() async throws {
        try await withTestDaemon { daemon in
            let user = try await daemon.createUser(Fixture.email, password: "correct horse")
            let answer = try await daemon.call(
                .POST, "/api/mobile/auth/login",
                json: [
                    "email": " Ana@Example.com ", "password": "correct horse", "deviceName": "Ana's iPhone", "platform": "iOS",
                    "fcmToken": "tok-123456",
                ])
            #expect(answer.status == 200)
            #expect(answer.json["success"] as? Bool == true)
            let userOut = try #require(answer.json["user"] as? [String: any Sendable])
            #expect(userOut["id"] as? String == user.id)
            #expect(userOut["email"] as? String == Fixture.email)
            let device = try #require(answer.json["device"] as? [String: any Sendable])
            #expect(device["name"] as? String == "Ana's iPhone")
            #expect(device["pushEnabled"] as? Bool == true)
            let key = try #require(answer["apiKey"])
            #expect(key.count >= 43)  // 256 bits, base64url
            let pending = try await daemon.call(.GET, "/api/mobile/approvals/pending", apiKey: key)
            #expect(pending.status == 200)
            // Stored as a hash only.
            let stored = try await daemon.server.store.device(apiKeyHash: SecureToken.sha256Hex(key))
            #expect(stored?.id == device["id"] as? String)
        }
    }

    @Test func loginWithTheSamePushTokenReplacesTheDeviceAndItsOldKey() async throws {
        try await withTestDaemon { daemon in
            let user = try await daemon.createUser(Fixture.email, password: "correct horse")
            let first = try await daemon.login(Fixture.email, password: "correct horse", fcmToken: "same-token")
            let second = try await daemon.login(Fixture.email, password: "correct horse", fcmToken: "same-token")
            // A new device, never the old one taken over (trust.md): the old one is signed out.
            #expect(first.deviceID != second.deviceID)
            #expect(try await daemon.call(.GET, "/api/mobile/approvals/pending", apiKey: first.apiKey).status == 401)
            #expect(try await daemon.call(.GET, "/api/mobile/approvals/pending", apiKey: second.apiKey).status == 200)
            #expect(try await daemon.server.store.devices(userID: user.id).count == 1)
        }
    }

    @Test func wrongPasswordAndUnknownEmailGetTheSame401() async throws {
        try await withTestDaemon { daemon in
            try await daemon.createUser(Fixture.email, password: "correct horse")
            let body: (String, String) -> [String: any Sendable] = { email, password in
                ["email": email, "password": password, "deviceName": "x", "platform": "iOS"]
            }
            let wrong = try await daemon.call(.POST, "/api/mobile/auth/login", json: body(Fixture.email, "wrong password"))
            let unknown = try await daemon.call(.POST, "/api/mobile/auth/login", json: body("bob@example.com", "wrong password"))
            #expect(wrong.status == 401)
            #expect(wrong["error"] == "invalid_credentials")
            #expect(wrong.text == unknown.text)
            #expect(unknown.status == 401)
        }
    }

    @Test func malformedLoginBodiesAreRefusedNamingTheProblem() async throws {
        try await withTestDaemon { daemon in
            let missing = try await daemon.call(.POST, "/api/mobile/auth/login", json: ["email": Fixture.email, "password": "x", "platform": "iOS"])
            #expect(missing.status == 400)
            #expect(missing["error"] == "invalid_request")
            #expect(missing["message"]?.contains("deviceName") == true)

            let wrongType = try await daemon.call(
                .POST, "/api/mobile/auth/login", json: ["email": 42, "password": "x", "deviceName": "d", "platform": "iOS"])
            #expect(wrongType.status == 400)
            #expect(wrongType["message"]?.contains("email") == true)

            let notJSON = try await daemon.call(.POST, "/api/mobile/auth/login", rawBody: Array("{not json".utf8))
            #expect(notJSON.status == 400)
            #expect(notJSON["error"] == "invalid_request")

            let form = try await daemon.call(
                .POST, "/api/mobile/auth/login", rawBody: Array("email=a".utf8), contentType: "application/x-www-form-urlencoded")
            #expect(form.status == 415)
            #expect(form["error"] == "unsupported_media_type")

            let huge = String(repeating: "a", count: 17 * 1024)
            let tooLarge = try await daemon.call(
                .POST, "/api/mobile/auth/login", json: ["email": Fixture.email, "password": huge, "deviceName": "d", "platform": "iOS"])
            #expect(tooLarge.status == 413)
            #expect(tooLarge["error"] == "payload_too_large")
            #expect(tooLarge.json["success"] as? Bool == false)
        }
    }

    @Test func refreshKeyReplacesTheKeyOnlyWithTheRightPassword() async throws {
        try await withTestDaemon { daemon in
            try await daemon.createUser(Fixture.email, password: "correct horse")
            let (key, _) = try await daemon.login(Fixture.email, password: "correct horse")

            let noKey = try await daemon.call(.POST, "/api/mobile/auth/refresh-key", json: ["password": "correct horse"])
            #expect(noKey.status == 401)
            #expect(noKey["error"] == "unauthorized")

            let wrong = try await daemon.call(.POST, "/api/mobile/auth/refresh-key", json: ["password": "nope nope"], apiKey: key)
            #expect(wrong.status == 401)
            #expect(wrong["error"] == "invalid_credentials")

            let missing = try await daemon.call(.POST, "/api/mobile/auth/refresh-key", json: [:], apiKey: key)
            #expect(missing.status == 400)

            let refreshed = try await daemon.call(
                .POST, "/api/mobile/auth/refresh-key", json: ["password": "correct horse"],
                headers: [("Authorization", "Bearer \(key)")])
            #expect(refreshed.status == 200)
            let newKey = try #require(refreshed["apiKey"])
            #expect(newKey != key)
            #expect(try await daemon.call(.GET, "/api/mobile/approvals/pending", apiKey: key).status == 401)
            #expect(try await daemon.call(.GET, "/api/mobile/approvals/pending", apiKey: newKey).status == 200)
        }
    }

    @Test func pushTokenUpdateAndSignOut() async throws {
        try await withTestDaemon { daemon in
            let user = try await daemon.createUser(Fixture.email, password: "correct horse")
            let (key, deviceID) = try await daemon.login(Fixture.email, password: "correct horse", fcmToken: "")
            #expect(try await daemon.server.store.devices(userID: user.id).first?.pushEnabled == false)

            let updated = try await daemon.call(.PUT, "/api/mobile/device/fcm-token", json: ["fcmToken": "fresh-token-abcdef"], apiKey: key)
            #expect(updated.status == 200)
            #expect(updated.json["success"] as? Bool == true)
            let device = try #require(try await daemon.server.store.devices(userID: user.id).first)
            #expect(device.id == deviceID)
            #expect(device.push?.token == "fresh-token-abcdef")
            #expect(device.pushEnabled)

            #expect(try await daemon.call(.PUT, "/api/mobile/device/fcm-token", json: [:], apiKey: key).status == 400)
            #expect(try await daemon.call(.PUT, "/api/mobile/device/fcm-token", json: ["fcmToken": "x"]).status == 401)

            let signedOut = try await daemon.call(.DELETE, "/api/mobile/device", apiKey: key)
            #expect(signedOut.status == 200)
            #expect(try await daemon.call(.DELETE, "/api/mobile/device", apiKey: key).status == 401)
            #expect(try await daemon.server.store.devices(userID: user.id).isEmpty)
        }
    }

    @Test func healthAndUnknownRoutesAnswerWithTheContractShapes() async throws {
        try await withTestDaemon { daemon in
            let health = try await daemon.call(.GET, "/healthz")
            #expect(health.status == 200)
            #expect(health["status"] == "ok")
            #expect(health["database"] == "ok")
            #expect(health["push"] == "disabled")

            let nowhere = try await daemon.call(.GET, "/api/mobile/nowhere")
            #expect(nowhere.status == 404)
            #expect(nowhere["error"] == "not_found")
            #expect(nowhere.json["success"] as? Bool == false)
        }
    }
}

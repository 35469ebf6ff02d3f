import CountersignCore
import CountersignDeviceKeys
import CountersignRuntime
import Foundation
import JWTKit
import NIOHTTP1
import TestSupport
import Testing

@testable import DaemonTestSupport

/// trust.md's bounds, each through HTTP: devices per user, codes and
/// approvals per integration, key changes per device, links without `Host`.
@Suite struct TrustLimitsTests {
    /// A device an integration enrolled cannot approve a password reset until the
    /// user signs in with their password on it (the same push token): that makes a
    /// new device, which may, and signs the enrolled one out; the enrolled key is gone.
    @Test func anEnrolledDeviceApprovesResetsOnlyOnceTheUserSignsInOnIt() async throws {
        try await withTestDaemon { daemon in
            let user = try await daemon.createUser(Fixture.email, password: Fixture.password)
            let acme = try await daemon.addIntegration("Acme")
            #expect(try await daemon.server.store.grantUser(integrationID: acme.id, userID: user.id, at: Date()))
            let enrolled = try await daemon.enroll(Fixture.email, integrationKey: acme.key, deviceName: "Tablet", fcmToken: "tablet-token")
            let (id, code) = try await daemon.initiate(Fixture.email, newPassword: Fixture.newPassword)
            let refused = try await daemon.respond(id, apiKey: enrolled.apiKey, code: code)
            #expect(refused.status == 403)
            #expect(refused["error"] == "forbidden")

            let (signedIn, deviceID) = try await daemon.login(Fixture.email, password: Fixture.password, device: "Tablet", fcmToken: "tablet-token")
            #expect(deviceID != enrolled.deviceID)
            #expect(try await daemon.respond(id, apiKey: enrolled.apiKey, code: code).status == 401)
            #expect(try await daemon.respond(id, apiKey: signedIn, code: code).status == 200)
            #expect(try await daemon.status(id)["status"] == "approved")
        }
    }

    @Test func aUsersDevicesAreBoundedAndTheRefusalSaysHowToMakeRoom() async throws {
        try await withTestDaemon(configure: { $0.maxDevicesPerUser = 2 }) { daemon in
            let user = try await daemon.createUser(Fixture.email, password: Fixture.password)
            _ = try await daemon.login(Fixture.email, password: Fixture.password, device: "One", fcmToken: "token-one")
            _ = try await daemon.login(Fixture.email, password: Fixture.password, device: "Two", fcmToken: "token-two")
            let third = try await daemon.call(
                .POST, "/api/mobile/auth/login",
                json: ["email": Fixture.email, "password": Fixture.password, "deviceName": "Three", "platform": "iOS", "fcmToken": "token-three"])
            #expect(third.status == 409)
            #expect(third["error"] == "too_many_devices")
            #expect(third["message"]?.contains("DELETE /api/mobile/device") == true)
            #expect(third["message"]?.contains("countersign device revoke") == true)
            #expect(try await daemon.server.store.devices(userID: user.id).map(\.name) == ["One", "Two"])
            // The same phone signing in again replaces its device: allowed.
            #expect(
                try await daemon.login(Fixture.email, password: Fixture.password, device: "One again", fcmToken: "token-one").apiKey.isEmpty == false)
        }
    }

    /// An enrollment beyond the bound is refused the same way, and its code stays usable.
    @Test func anEnrollmentBeyondTheBoundIsRefusedAndKeepsItsCode() async throws {
        try await withTestDaemon(configure: { $0.maxDevicesPerUser = 1 }) { daemon in
            let acme = try await daemon.addIntegration("Acme")
            #expect(try await daemon.v1(.POST, "/v1/users", key: acme.key, json: ["email": Fixture.email]).status == 201)
            let (first, _, _) = try await daemon.enroll(Fixture.email, integrationKey: acme.key, deviceName: "One")
            let code = try #require(try await daemon.v1(.POST, "/v1/users/\(Fixture.email)/enrollments", key: acme.key)["enrollmentCode"])
            let body: [String: any Sendable] = ["enrollmentCode": code, "deviceName": "Two", "platform": "iOS"]
            let refused = try await daemon.call(.POST, "/api/mobile/auth/enroll", json: body)
            #expect(refused.status == 409)
            #expect(refused["error"] == "too_many_devices")
            #expect(try await daemon.v1(.DELETE, "/v1/users/\(Fixture.email)/devices/\(first)", key: acme.key).status == 200)
            #expect(try await daemon.call(.POST, "/api/mobile/auth/enroll", json: body).status == 200)
        }
    }

    @Test func enrollmentCodesAreLimitedPerIntegration() async throws {
        try await withTestDaemon(configure: { $0.rateLimits[.enrollmentsPerIntegration] = RateLimit(count: 2, window: 600) }, clock: ManualClock()) {
            daemon in
            let acme = try await daemon.addIntegration("Acme")
            #expect(try await daemon.v1(.POST, "/v1/users", key: acme.key, json: ["email": Fixture.email]).status == 201)
            for _ in 0..<2 { #expect(try await daemon.v1(.POST, "/v1/users/\(Fixture.email)/enrollments", key: acme.key).status == 201) }
            let third = try await daemon.v1(.POST, "/v1/users/\(Fixture.email)/enrollments", key: acme.key)
            #expect(third.status == 429)
            #expect(third["error"] == "rate_limited")
        }
    }

    /// One relying service cannot use up another's budget for the same person;
    /// a looser bound holds the sum.
    @Test func approvalsPerUserCountPerIntegrationUnderALooserSum() async throws {
        try await withTestDaemon(
            configure: {
                $0.rateLimits[.approvalsPerUser] = RateLimit(count: 2, window: 60)
                $0.rateLimits[.approvalsPerUserAllIntegrations] = RateLimit(count: 3, window: 60)
            }, clock: ManualClock()
        ) { daemon in
            try await daemon.createUser(Fixture.email, password: Fixture.password)
            _ = try await daemon.login(Fixture.email, password: Fixture.password)
            let acme = try await daemon.addIntegration("Acme", promptsAllUsers: true)
            let other = try await daemon.addIntegration("Other", promptsAllUsers: true)
            for _ in 0..<2 { #expect(try await daemon.v1(.POST, "/v1/approvals", key: acme.key, json: ApprovalsAPITests.approval).status == 201) }
            #expect(try await daemon.v1(.POST, "/v1/approvals", key: acme.key, json: ApprovalsAPITests.approval).status == 429)
            // Acme's budget is spent; Other's is not.
            #expect(try await daemon.v1(.POST, "/v1/approvals", key: other.key, json: ApprovalsAPITests.approval).status == 201)
            // But the sum for ana is: 3 in all.
            #expect(try await daemon.v1(.POST, "/v1/approvals", key: other.key, json: ApprovalsAPITests.approval).status == 429)
        }
    }

    @Test func keyChangesAreLimitedPerDevice() async throws {
        try await withTestDaemon(configure: { $0.rateLimits[.deviceKeyChangesPerDevice] = RateLimit(count: 1, window: 3600) }, clock: ManualClock()) {
            daemon in
            try await daemon.createUser(Fixture.email, password: Fixture.password)
            let (apiKey, deviceID) = try await daemon.login(Fixture.email, password: Fixture.password)
            let key = ES256PrivateKey()
            func put() async throws -> TestDaemon.Answer {
                try await daemon.call(
                    .PUT, "/api/mobile/device/public-key",
                    json: [
                        "publicKey": try DeviceKey(signingKey: key).jwk,
                        "proof": try await PossessionProof.sign(deviceID: deviceID, at: Date(), with: key),
                    ], apiKey: apiKey)
            }
            #expect(try await put().status == 200)
            let second = try await put()
            #expect(second.status == 429)
            #expect(second["error"] == "rate_limited")
        }
    }

    /// Without `--public-url`, links use the listen address; `Host` never reaches them.
    @Test func anEnrollmentLinkNeverComesFromTheHostHeader() async throws {
        try await withTestDaemon(.socket) { daemon in
            let acme = try await daemon.addIntegration("Acme")
            #expect(try await daemon.v1(.POST, "/v1/users", key: acme.key, json: ["email": Fixture.email]).status == 201)
            let issued = try await daemon.v1(
                .POST, "/v1/users/\(Fixture.email)/enrollments", key: acme.key,
                headers: [("Host", "evil.example"), ("X-Forwarded-Host", "evil.example")])
            #expect(issued.status == 201)
            let uri = try #require(issued["enrollmentURI"])
            #expect(!uri.contains("evil"), "\(uri)")
            #expect(uri.contains("127.0.0.1"), "\(uri)")
        }
    }

    /// Without `--public-url` the daemon says at start where links will point; with it, nothing.
    @Test func startingWithoutAPublicURLWarns() async throws {
        let quiet = LogCapture()
        try await withTestDaemon(configure: { $0.email.publicURL = "https://auth.example.com" }, logs: quiet) { _ in }
        #expect(!quiet.text.contains("no --public-url"))
        let warned = LogCapture()
        try await withTestDaemon(logs: warned) { _ in }
        #expect(
            warned.text.contains("warning no --public-url: enrollment and reset links point at the listen address"), "\(warned.text.prefix(1500))")
    }
}

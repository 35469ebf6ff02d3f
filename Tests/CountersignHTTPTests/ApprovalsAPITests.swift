import CountersignCore
import CountersignDeviceKeys
import CountersignHTTP
import CountersignPush
import CountersignRuntime
import FakeFCM
import Foundation
import NIOHTTP1
import Synchronization
import TestSupport
import Testing

@testable import DaemonTestSupport

/// The approvals API of relying services, over real HTTP and the real store.
@Suite struct ApprovalsAPITests {
    static let approval = V1Fixture.approval

    @Test func anIntegrationEnrollsADeviceAndGetsOneApprovalCompletedOnce() async throws {
        let logs = LogCapture()
        try await withTestDaemon(.socket, logs: logs) { daemon in
            let acme = try await daemon.addIntegration("Acme Admin")
            let other = try await daemon.addIntegration("Other")

            // Users: created without a password; a second create finds the same one.
            let created = try await daemon.v1(.POST, "/v1/users", key: acme.key, json: ["email": "Ana@Example.com"])
            #expect(created.status == 201)
            #expect(created["email"] == Fixture.email)
            let again = try await daemon.v1(.POST, "/v1/users", key: acme.key, json: ["email": Fixture.email])
            #expect(again.status == 200)
            #expect(again["userId"] == created["userId"])
            #expect(try await daemon.canLogIn(Fixture.email, password: "") == false)

            // Enrollment: a one-time code; the second use is refused.
            let (device, deviceKey, code) = try await daemon.enroll(Fixture.email, integrationKey: acme.key, deviceName: "Ana's iPhone")
            let reuse = try await daemon.call(
                .POST, "/api/mobile/auth/enroll", json: ["enrollmentCode": code, "deviceName": "Thief", "platform": "iOS"])
            #expect(reuse.status == 400)
            #expect(reuse["error"] == "invalid_code")
            let devices = try await daemon.v1(.GET, "/v1/users/\(Fixture.email)/devices", key: acme.key)
            let listed = try #require(devices.json["devices"] as? [[String: any Sendable]])
            #expect(listed.map { $0["id"] as? String } == [device])
            #expect(listed.first?["name"] as? String == "Ana's iPhone")
            // Every field approvals-api.md lists is there, lastSeenAt as null before the device is seen.
            #expect(
                Set(listed.first?.keys.map { $0 } ?? [])
                    == ["id", "name", "platform", "pushEnabled", "keyBound", "createdAt", "lastSeenAt"])

            // Create: the device sees the integration's words in pull mode.
            let answer = try await daemon.v1(.POST, "/v1/approvals", key: acme.key, json: Self.approval)
            #expect(answer.status == 201)
            #expect(answer["status"] == "pending")
            let id = try #require(answer["approvalId"])
            let number = try #require(answer["numberCode"])
            // Unanswered: the answer's fields are there, as null.
            let unanswered = try await daemon.v1(.GET, "/v1/approvals/\(id)", key: acme.key).json
            #expect(unanswered["decidedAt"] is NSNull && unanswered["device"] is NSNull && unanswered["deviceKeyBound"] is NSNull)
            let pending = try await daemon.call(.GET, "/api/mobile/approvals/pending", apiKey: deviceKey)
            let item = try #require((pending.json["approvals"] as? [[String: any Sendable]])?.first)
            #expect(item["requestId"] as? String == id)
            #expect(item["action"] as? String == "login")
            #expect(item["title"] as? String == "Sign in to Acme Admin")
            #expect(item["body"] as? String == "Firefox on Linux, near Berlin")
            #expect((item["context"] as? [String: String]) == ["ip": "203.0.113.7", "location": "Berlin, DE"])
            #expect((item["integration"] as? [String: String]) == ["name": "Acme Admin"])

            // Another integration cannot see it, nor the phone-reset routes.
            #expect(try await daemon.v1(.GET, "/v1/approvals/\(id)", key: other.key).status == 404)
            #expect(try await daemon.v1(.POST, "/v1/approvals/\(id)/cancel", key: other.key).status == 404)
            #expect(try await daemon.status(id).status == 404)
            #expect(try await daemon.complete(id).status == 404)

            // A long poll wakes when the device approves with the number (it would wait 30 s;
            // the client gives up after 25, so an answer at all is the wake-up).
            let poll = Task { try await daemon.v1(.GET, "/v1/approvals/\(id)?wait=30", key: acme.key, timeout: .seconds(25)) }
            try await daemon.waitForLongPolls(1)
            #expect(try await daemon.respond(id, apiKey: deviceKey, code: number).status == 200)
            let woke = try await poll.value
            #expect(woke["status"] == "approved")
            #expect((woke.json["device"] as? [String: String]) == ["id": device, "name": "Ana's iPhone"])
            #expect(woke.json["deviceKeyBound"] as? Bool == false)
            #expect(woke["decidedAt"] != nil)

            // Complete: 50 at once, exactly one wins.
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<50 { group.addTask { try await daemon.v1(.POST, "/v1/approvals/\(id)/complete", key: acme.key).status } }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(statuses.filter { $0 == 200 }.count == 1)
            #expect(statuses.filter { $0 == 409 }.count == 49)
            #expect(try await daemon.v1(.GET, "/v1/approvals/\(id)", key: acme.key)["status"] == "completed")
            // Completing an integration's approval sets no password.
            #expect(try await daemon.canLogIn(Fixture.email, password: "") == false)

            // A rotated key stops at once; a disabled integration too.
            let rotated = Integration.newAPIKey()
            #expect(try await daemon.server.store.rotateIntegrationKey(id: acme.id, apiKeyHash: SecureToken.sha256Hex(rotated)))
            #expect(try await daemon.v1(.GET, "/v1/approvals/\(id)", key: acme.key).status == 401)
            #expect(try await daemon.v1(.GET, "/v1/approvals/\(id)", key: rotated).status == 200)
            #expect(try await daemon.server.store.setIntegrationEnabled(id: acme.id, enabled: false))
            let disabled = try await daemon.v1(.GET, "/v1/approvals/\(id)", key: rotated)
            #expect(disabled.status == 401)
            #expect(disabled["error"] == "unauthorized")
            #expect(try await daemon.v1(.GET, "/v1/approvals/\(id)", key: nil).status == 401)

            // Removing a device revokes its key; another integration cannot reach the user at all (trust.md).
            #expect(try await daemon.server.store.setIntegrationEnabled(id: acme.id, enabled: true))
            let byOther = try await daemon.v1(.DELETE, "/v1/users/\(Fixture.email)/devices/\(device)", key: other.key)
            #expect(byOther.status == 404)
            #expect(byOther["error"] == "user_not_found")
            #expect(try await daemon.v1(.DELETE, "/v1/users/\(Fixture.email)/devices/\(device)", key: rotated).status == 200)
            #expect(try await daemon.call(.GET, "/api/mobile/approvals/pending", apiKey: deviceKey).status == 401)

            // The trail names the integration on each step.
            for kind in [AuditKind.deviceEnrolled, .requestCreated, .approved, .completed, .deviceRemoved, .enrollmentIssued] {
                let events = try await daemon.waitForAudit(kind)
                #expect(events.contains { $0.detail?.contains("integration ") == true }, "\(kind)")
            }

            // No key, code or number in the logs.
            let text = logs.text
            for secret in [acme.key, rotated, other.key, code, deviceKey] { #expect(!text.contains(secret)) }
            #expect(!text.contains("numberCode"))
        }
    }

    @Test func idempotentCreatesReturnTheFirstAnswerAndRefuseAnotherBody() async throws {
        try await withTestDaemon { daemon in
            let acme = try await daemon.addIntegration("Acme")
            _ = try await daemon.v1(.POST, "/v1/users", key: acme.key, json: ["email": Fixture.email])
            _ = try await daemon.enroll(Fixture.email, integrationKey: acme.key)
            let key = [("Idempotency-Key", "order-4711")]
            let answers = try await withThrowingTaskGroup(of: TestDaemon.Answer.self) { group in
                for _ in 0..<8 { group.addTask { try await daemon.v1(.POST, "/v1/approvals", key: acme.key, json: Self.approval, headers: key) } }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(answers.allSatisfy { $0.status == 201 })
            #expect(Set(answers.compactMap { $0["approvalId"] }).count == 1)
            #expect(Set(answers.compactMap { $0["numberCode"] }).count == 1)
            let later = try await daemon.v1(.POST, "/v1/approvals", key: acme.key, json: Self.approval, headers: key)
            #expect(later.status == 201)
            #expect(later["approvalId"] == answers[0]["approvalId"])
            // One approval only: the device sees one prompt.
            #expect(
                try await daemon.server.broker.pendingRequests(ofUser: try #require(daemon.server.store.user(email: Fixture.email)).id).count == 1)

            var changed = Self.approval
            changed["title"] = "Pay 5000 EUR"
            let mismatch = try await daemon.v1(.POST, "/v1/approvals", key: acme.key, json: changed, headers: key)
            #expect(mismatch.status == 409)
            #expect(mismatch["error"] == "idempotency_mismatch")
            // The same key from another integration is another key.
            let other = try await daemon.addIntegration("Other", promptsAllUsers: true)
            let theirs = try await daemon.v1(.POST, "/v1/approvals", key: other.key, json: Self.approval, headers: key)
            #expect(theirs.status == 201)
            #expect(theirs["approvalId"] != answers[0]["approvalId"])
        }
    }

    @Test func refusalsNameTheirCause() async throws {
        try await withTestDaemon { daemon in
            let acme = try await daemon.addIntegration("Acme")
            #expect(try await daemon.v1(.POST, "/v1/approvals", key: acme.key, json: Self.approval)["error"] == "user_not_found")
            #expect(try await daemon.v1(.POST, "/v1/approvals", key: acme.key, json: Self.approval).status == 404)
            #expect(try await daemon.v1(.POST, "/v1/users/nobody@example.com/enrollments", key: acme.key)["error"] == "user_not_found")
            #expect(try await daemon.v1(.GET, "/v1/users/nobody@example.com/devices", key: acme.key).status == 404)
            _ = try await daemon.v1(.POST, "/v1/users", key: acme.key, json: ["email": Fixture.email])
            let notEnrolled = try await daemon.v1(.POST, "/v1/approvals", key: acme.key, json: Self.approval)
            #expect(notEnrolled.status == 422)
            #expect(notEnrolled["error"] == "not_enrolled")
            _ = try await daemon.enroll(Fixture.email, integrationKey: acme.key)

            let bad: [(String, any Sendable, String)] = [
                ("action", "Log In", "action"),
                ("action", String(repeating: "a", count: 65), "action"),
                ("title", String(repeating: "t", count: 81), "title"),
                ("title", "", "title"),
                ("body", String(repeating: "b", count: 241), "body"),
                ("context", ["ip": 7], "context"),
                ("context", ["ip": String(repeating: "c", count: 201)], "context.ip"),
                ("ttl", 9, "ttl"),
                ("ttl", 301, "ttl"),
                ("user", "not-an-email", "email"),
                ("numberMatching", "yes", "numberMatching"),
                ("action", "password_reset", "password_reset"),
            ]
            for (field, value, named) in bad {
                var body = Self.approval
                body[field] = value
                let answer = try await daemon.v1(.POST, "/v1/approvals", key: acme.key, json: body)
                #expect(answer.status == 400, "\(field) = \(value)")
                #expect(answer["error"] == "invalid_request")
                #expect(answer["message"]?.contains(named) == true, "\(answer["message"] ?? "")")
            }
            var missing = Self.approval
            missing["title"] = nil
            #expect(try await daemon.v1(.POST, "/v1/approvals", key: acme.key, json: missing)["message"]?.contains("title") == true)
            let longKey = try await daemon.v1(
                .POST, "/v1/approvals", key: acme.key, json: Self.approval, headers: [("Idempotency-Key", String(repeating: "k", count: 256))])
            #expect(longKey.status == 400)
            #expect(try await daemon.v1(.GET, "/v1/approvals/no-such-approval", key: acme.key).status == 404)
            #expect(try await daemon.v1(.GET, "/v1/approvals/x?wait=31", key: acme.key).status == 400)
            let wrongCode = try await daemon.call(
                .POST, "/api/mobile/auth/enroll", json: ["enrollmentCode": "2222-2222-2222", "deviceName": "X", "platform": "iOS"])
            #expect(wrongCode.status == 400)
            #expect(wrongCode["error"] == "invalid_code")
            for typed in ["", String(repeating: "7", count: 100), "not a code"] {
                let refused = try await daemon.call(
                    .POST, "/api/mobile/auth/enroll", json: ["enrollmentCode": typed, "deviceName": "X", "platform": "iOS"])
                #expect(refused["error"] == "invalid_code", "\(typed)")
            }
        }
    }

    @Test func wrongEnrollmentCodesAreLimitedPerAddress() async throws {
        try await withTestDaemon(configure: { $0.rateLimits[.enrollFailuresPerIP] = RateLimit(count: 3, window: 900) }) { daemon in
            let acme = try await daemon.addIntegration("Acme")
            _ = try await daemon.v1(.POST, "/v1/users", key: acme.key, json: ["email": Fixture.email])
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<10 {
                    group.addTask {
                        try await daemon.call(
                            .POST, "/api/mobile/auth/enroll", json: ["enrollmentCode": "2222-3333-4444", "deviceName": "X", "platform": "iOS"]
                        ).status
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(statuses.filter { $0 == 400 }.count == 3)
            #expect(statuses.filter { $0 == 429 }.count == 7)
        }
    }

    @Test func approvalsPerIntegrationAreLimitedAcrossUsers() async throws {
        try await withTestDaemon(
            configure: { $0.rateLimits[.approvalsPerIntegration] = RateLimit(count: 2, window: 60) }, clock: ManualClock()
        ) { daemon in
            let acme = try await daemon.addIntegration("Acme")
            let other = try await daemon.addIntegration("Other", promptsAllUsers: true)
            var statuses: [Int] = []
            for email in ["a@example.com", "b@example.com", "c@example.com"] {
                _ = try await daemon.v1(.POST, "/v1/users", key: acme.key, json: ["email": email])
                _ = try await daemon.enroll(email, integrationKey: acme.key)
                var body = Self.approval
                body["user"] = email
                statuses.append(try await daemon.v1(.POST, "/v1/approvals", key: acme.key, json: body).status)
            }
            #expect(statuses == [201, 201, 429])
            var body = Self.approval
            body["user"] = "c@example.com"
            #expect(try await daemon.v1(.POST, "/v1/approvals", key: other.key, json: body).status == 201)
        }
    }

    /// approvals-api.md: a newer approval replaces the same integration's pending one for that user and action, no other's.
    @Test func aNewerApprovalReplacesOnlyItsOwnIntegrationsPendingOne() async throws {
        try await withTestDaemon { daemon in
            let acme = try await daemon.addIntegration("Acme")
            let other = try await daemon.addIntegration("Other", promptsAllUsers: true)
            _ = try await daemon.v1(.POST, "/v1/users", key: acme.key, json: ["email": Fixture.email])
            _ = try await daemon.enroll(Fixture.email, integrationKey: acme.key)
            let first = try #require(try await daemon.v1(.POST, "/v1/approvals", key: acme.key, json: Self.approval)["approvalId"])
            let theirs = try #require(try await daemon.v1(.POST, "/v1/approvals", key: other.key, json: Self.approval)["approvalId"])
            #expect(try await daemon.v1(.GET, "/v1/approvals/\(first)", key: acme.key)["status"] == "pending")
            let second = try #require(try await daemon.v1(.POST, "/v1/approvals", key: acme.key, json: Self.approval)["approvalId"])
            #expect(try await daemon.v1(.GET, "/v1/approvals/\(first)", key: acme.key)["status"] == "cancelled")
            #expect(try await daemon.v1(.GET, "/v1/approvals/\(second)", key: acme.key)["status"] == "pending")
            #expect(try await daemon.v1(.GET, "/v1/approvals/\(theirs)", key: other.key)["status"] == "pending")
        }
    }

    @Test func numberMatchingAndTTLAreTheIntegrationsChoice() async throws {
        try await withTestDaemon { daemon in
            let acme = try await daemon.addIntegration("Acme")
            _ = try await daemon.v1(.POST, "/v1/users", key: acme.key, json: ["email": Fixture.email])
            let device = try await daemon.enroll(Fixture.email, integrationKey: acme.key)
            var body = Self.approval
            body["numberMatching"] = false
            body["ttl"] = 120
            let answer = try await daemon.v1(.POST, "/v1/approvals", key: acme.key, json: body)
            #expect(answer.status == 201)
            #expect(answer.json["numberCode"] == nil)
            let expires = try #require(
                answer["expiresAt"].flatMap { try? Date($0, strategy: .iso8601.year().month().day().time(includingFractionalSeconds: true)) })
            #expect(abs(expires.timeIntervalSinceNow - 120) < 10)
            let id = try #require(answer["approvalId"])
            #expect(try await daemon.respond(id, apiKey: device.apiKey, code: nil).status == 200)
            #expect(try await daemon.v1(.GET, "/v1/approvals/\(id)", key: acme.key)["status"] == "approved")
        }
    }

    @Test func aSignedAnswerIsKeyBoundForTheRelyingService() async throws {
        try await withTestDaemon { daemon in
            try await daemon.createUser(Fixture.email, password: Fixture.password)
            let phone = try await DeviceKeyTests.signIn(daemon)
            let acme = try await daemon.addIntegration("Acme", promptsAllUsers: true)
            let answer = try await daemon.v1(.POST, "/v1/approvals", key: acme.key, json: Self.approval)
            let id = try #require(answer["approvalId"])
            let code = answer["numberCode"]
            let signature = try await AnswerSignature.sign(phone.payload(id, code: code), with: phone.key)
            #expect(try await DeviceKeyTests.respond(daemon, id, apiKey: phone.apiKey, code: code, signature: signature).status == 200)
            let status = try await daemon.v1(.GET, "/v1/approvals/\(id)", key: acme.key)
            #expect(status.json["deviceKeyBound"] as? Bool == true)
            #expect((status.json["device"] as? [String: String])?["id"] == phone.deviceID)
        }
    }

    @Test func approvalsPerUserAreLimited() async throws {
        try await withTestDaemon(configure: { $0.rateLimits[.approvalsPerUser] = RateLimit(count: 2, window: 60) }, clock: ManualClock()) {
            daemon in
            let acme = try await daemon.addIntegration("Acme")
            _ = try await daemon.v1(.POST, "/v1/users", key: acme.key, json: ["email": Fixture.email])
            _ = try await daemon.enroll(Fixture.email, integrationKey: acme.key)
            var statuses: [Int] = []
            for _ in 0..<4 { statuses.append(try await daemon.v1(.POST, "/v1/approvals", key: acme.key, json: Self.approval).status) }
            #expect(statuses == [201, 201, 429, 429])
        }
    }

    @Test func thePushCarriesTheIntegrationsWords() async throws {
        try await withTemporaryFolder { folder in
            try await FakeFCMServer.run(folder: folder) { fake, base, file in
                let configuration = TestDaemon.configuration(folder) { $0.push = PushConfiguration(serviceAccountFile: file, endpoint: base) }
                try await TestDaemon.run(configuration) { daemon in
                    let acme = try await daemon.addIntegration("Acme Admin")
                    _ = try await daemon.v1(.POST, "/v1/users", key: acme.key, json: ["email": Fixture.email])
                    _ = try await daemon.enroll(Fixture.email, integrationKey: acme.key, fcmToken: "token-ana")
                    let answer = try await daemon.v1(.POST, "/v1/approvals", key: acme.key, json: Self.approval)
                    let id = try #require(answer["approvalId"])
                    try await PushFlowTests.eventually { !fake.received.isEmpty }
                    let prompt = try #require(fake.received.first)
                    #expect(prompt.token == "token-ana")
                    #expect(prompt.data["requestId"] == id)
                    #expect(prompt.data["action"] == "login")
                    #expect(prompt.data["title"] == "Sign in to Acme Admin")
                    #expect(prompt.data["body"] == "Firefox on Linux, near Berlin")
                    #expect(prompt.data["integration"] == "Acme Admin")
                    #expect(prompt.data["context"] == #"{"ip":"203.0.113.7","location":"Berlin, DE"}"#)
                    #expect(prompt.json.contains("Sign in to Acme Admin"))
                    #expect(!prompt.json.contains("numberCode"))
                    #expect(fake.rejections.isEmpty)
                }
            }
        }
    }

    @Test func aFraudReportOnAPhoneResetDoesNotSilenceIntegrations() async throws {
        try await withTestDaemon { daemon in
            try await daemon.createUser(Fixture.email, password: Fixture.password)
            let (deviceKey, _) = try await daemon.login(Fixture.email, password: Fixture.password)
            let (reset, _) = try await daemon.initiate(Fixture.email, newPassword: Fixture.newPassword)
            let report = try await daemon.call(
                .POST, "/api/mobile/approvals/\(reset)/respond", json: ["decision": "deny", "reportFraud": true], apiKey: deviceKey)
            #expect(report.status == 200)
            // Phone resets are silenced...
            let (silenced, _) = try await daemon.initiate(Fixture.email, newPassword: Fixture.newPassword)
            // ...the integration's sign-in still reaches the phone.
            let acme = try await daemon.addIntegration("Acme", promptsAllUsers: true)
            let approval = try #require(try await daemon.v1(.POST, "/v1/approvals", key: acme.key, json: Self.approval)["approvalId"])
            let pending = try await daemon.call(.GET, "/api/mobile/approvals/pending", apiKey: deviceKey)
            let ids = (pending.json["approvals"] as? [[String: any Sendable]] ?? []).compactMap { $0["requestId"] as? String }
            #expect(ids == [approval])
            #expect(!ids.contains(silenced))
            // The phone shows who the integration says asked.
            let item = try await daemon.call(.GET, "/api/mobile/approvals/\(approval)", apiKey: deviceKey)
            #expect((item.json["requester"] as? [String: String])?["ip"] == "203.0.113.7")
        }
    }

    @Test func thePhoneResetIsOneActionOnTheSameBroker() async throws {
        try await withTestDaemon { daemon in
            try await daemon.createUser(Fixture.email, password: Fixture.password)
            let (deviceKey, _) = try await daemon.login(Fixture.email, password: Fixture.password)
            let acme = try await daemon.addIntegration("Acme", promptsAllUsers: true)
            // An integration's approval and a phone reset for the same user live side by side.
            let approval = try #require(try await daemon.v1(.POST, "/v1/approvals", key: acme.key, json: Self.approval)["approvalId"])
            try await Task.sleep(for: .milliseconds(20))  // created at distinct times
            let (reset, code) = try await daemon.initiate(Fixture.email, newPassword: Fixture.newPassword)
            let pending = try await daemon.call(.GET, "/api/mobile/approvals/pending", apiKey: deviceKey)
            let items = try #require(pending.json["approvals"] as? [[String: any Sendable]])
            // Newest first (http-api.md).
            #expect(items.compactMap { $0["requestId"] as? String } == [reset, approval])
            #expect(items.first { $0["requestId"] as? String == reset }?["title"] == nil)
            // The phone reset's id is no approval of the integration's.
            #expect(try await daemon.v1(.GET, "/v1/approvals/\(reset)", key: acme.key).status == 404)
            #expect(try await daemon.respond(reset, apiKey: deviceKey, code: code).status == 200)
            #expect(try await daemon.complete(reset).status == 200)
            #expect(try await daemon.canLogIn(Fixture.email, password: Fixture.newPassword))
            #expect(try await daemon.v1(.GET, "/v1/approvals/\(approval)", key: acme.key)["status"] == "pending")
        }
    }
}

import CountersignCore
import CountersignHTTP
import CountersignRuntime
import Foundation
import NIOHTTP1
import TestSupport
import Testing

@testable import DaemonTestSupport

/// login-integrations.md, "What the rest module needs": one create that
/// waits for the approval's end (`"wait": N`) or checks a code typed with
/// it (`"code"`), answering 200 only for an approval used by that answer and
/// 403 for any other end; a retransmission (same `Idempotency-Key`) makes
/// no second approval.
@Suite struct WaitedCreateTests {
    static func body(wait: Int? = nil, code: String? = nil) -> [String: any Sendable] {
        var body = V1Fixture.approval
        body["action"] = "vpn-login"
        body["numberMatching"] = false
        if let wait { body["wait"] = wait }
        if let code { body["code"] = code }
        return body
    }

    /// Acme's integration, with the fixture's user added to it.
    static func acmeWithUser(_ daemon: TestDaemon) async throws -> (id: String, key: String, secret: String?) {
        let acme = try await daemon.addIntegration("Acme")
        let added = try await daemon.v1(.POST, "/v1/users", key: acme.key, json: ["email": Fixture.email])
        #expect(added.status == 201, "\(added.text)")
        return acme
    }

    /// The user's pending approval, once the waiting create made it.
    static func pending(_ daemon: TestDaemon) async throws -> ApprovalRequest {
        let user = try #require(try await daemon.server.store.user(email: Fixture.email))
        for _ in 0..<400 {
            if let request = try await daemon.server.broker.pendingRequests(ofUser: user.id).first { return request }
            try await Task.sleep(for: .milliseconds(25))
        }
        throw TestFailure("no pending approval appeared")
    }

    @Test func aWaitingCreateAnswersOnceApprovedAndARetransmissionWaitsOnTheSameApproval() async throws {
        try await withTestDaemon { daemon in
            let acme = try await Self.acmeWithUser(daemon)
            let device = try await daemon.enroll(Fixture.email, integrationKey: acme.key)
            let key = [("Idempotency-Key", "radius-127.0.0.1-1812-00ff")]
            async let first = daemon.v1(.POST, "/v1/approvals", key: acme.key, json: Self.body(wait: 30), headers: key)
            let approval = try await Self.pending(daemon)
            // The retransmission, while the first still waits.
            async let again = daemon.v1(.POST, "/v1/approvals", key: acme.key, json: Self.body(wait: 30), headers: key)
            try await Task.sleep(for: .milliseconds(200))
            #expect(try await daemon.respond(approval.id, apiKey: device.apiKey, code: nil).status == 200)
            let (answer, repeated) = try await (first, again)
            #expect(answer.status == 200, "\(answer.text)")
            #expect(answer["status"] == "completed")
            #expect(answer["approvalId"] == approval.id)
            #expect(answer["via"] == "push")
            #expect(repeated.status == 200, "\(repeated.text)")
            #expect(repeated["approvalId"] == approval.id)
            // Used by that answer: a later complete finds it done, and there was one approval only.
            let complete = try await daemon.v1(.POST, "/v1/approvals/\(approval.id)/complete", key: acme.key)
            #expect(complete.status == 409, "\(complete.text)")
            #expect(try await daemon.waitForAudit(.requestCreated).count == 1)
        }
    }

    @Test func aDeniedOrUnansweredWaitIsForbiddenAndTheUnansweredOneIsCancelled() async throws {
        try await withTestDaemon { daemon in
            let acme = try await Self.acmeWithUser(daemon)
            let device = try await daemon.enroll(Fixture.email, integrationKey: acme.key)

            async let denied = daemon.v1(.POST, "/v1/approvals", key: acme.key, json: Self.body(wait: 30))
            let approval = try await Self.pending(daemon)
            #expect(try await daemon.respond(approval.id, apiKey: device.apiKey, decision: "deny", code: nil).status == 200)
            let answer = try await denied
            #expect(answer.status == 403, "\(answer.text)")
            #expect(answer["error"] == "not_approved")
            #expect(answer["status"] == "denied")

            let unanswered = try await daemon.v1(.POST, "/v1/approvals", key: acme.key, json: Self.body(wait: 1))
            #expect(unanswered.status == 403, "\(unanswered.text)")
            #expect(unanswered["status"] == "cancelled")
            let user = try #require(try await daemon.server.store.user(email: Fixture.email))
            #expect(try await daemon.server.broker.pendingRequests(ofUser: user.id).isEmpty, "the phone's prompt is gone")

            for wait in [0, 56, -1] {
                let refused = try await daemon.v1(.POST, "/v1/approvals", key: acme.key, json: Self.body(wait: wait))
                #expect(refused.status == 400, "wait \(wait): \(refused.text)")
            }
        }
    }

    @Test func aCodeTypedWithTheCreateIsCheckedOnceAndAWrongOneEndsTheApproval() async throws {
        try await withTestDaemon { daemon in
            let acme = try await Self.acmeWithUser(daemon)
            let phone = try await TrustWhereFeaturesMeetTests.enrollWithSecret(daemon, Fixture.email, key: acme.key)

            let wrong = try await daemon.v1(
                .POST, "/v1/approvals", key: acme.key, json: Self.body(code: TrustWhereFeaturesMeetTests.wrong(phone.secret)))
            #expect(wrong.status == 403, "\(wrong.text)")
            #expect(wrong["status"] == "cancelled")

            let code = TrustWhereFeaturesMeetTests.codeNow(phone.secret)
            let key = [("Idempotency-Key", "radius-127.0.0.1-1812-0a0b")]
            let right = try await daemon.v1(.POST, "/v1/approvals", key: acme.key, json: Self.body(code: code), headers: key)
            #expect(right.status == 200, "\(right.text)")
            #expect(right["status"] == "completed")
            #expect(right["via"] == "offline_code")
            // A retransmission answers as the first did: the same approval, no second check.
            let again = try await daemon.v1(.POST, "/v1/approvals", key: acme.key, json: Self.body(code: code), headers: key)
            #expect(again.status == 200, "\(again.text)")
            #expect(again["approvalId"] == right["approvalId"])
            // The code is used: on another request it is refused.
            let reused = try await daemon.v1(.POST, "/v1/approvals", key: acme.key, json: Self.body(code: code))
            #expect(reused.status == 403, "\(reused.text)")

            let malformed = try await daemon.v1(.POST, "/v1/approvals", key: acme.key, json: Self.body(code: "12ab56"))
            #expect(malformed.status == 400, "\(malformed.text)")
        }
    }

    @Test func aCallerReadingOnlyStatusesGetsEveryRefusalOfTheUserAsForbidden() async throws {
        try await withTestDaemon { daemon in
            let acme = try await daemon.addIntegration("Acme")
            // Unknown, and known without a device: 404 and 422 on a plain create, 403 when waiting.
            var unknown = Self.body(wait: 5)
            unknown["user"] = "nobody@example.com"
            let refused = try await daemon.v1(.POST, "/v1/approvals", key: acme.key, json: unknown)
            #expect(refused.status == 403, "\(refused.text)")
            #expect(refused["error"] == "user_not_found")
            _ = try await daemon.v1(.POST, "/v1/users", key: acme.key, json: ["email": Fixture.email])
            let deviceless = try await daemon.v1(.POST, "/v1/approvals", key: acme.key, json: Self.body(code: "123456"))
            #expect(deviceless.status == 403, "\(deviceless.text)")
            #expect(deviceless["error"] == "not_enrolled")
            let plain = try await daemon.v1(.POST, "/v1/approvals", key: acme.key, json: Self.body())
            #expect(plain.status == 422, "a plain create keeps its answers: \(plain.text)")
        }
    }

    @Test func aRepeatWithAnotherCodeOrNoneIsAnotherRequest() async throws {
        try await withTestDaemon { daemon in
            let acme = try await Self.acmeWithUser(daemon)
            let phone = try await TrustWhereFeaturesMeetTests.enrollWithSecret(daemon, Fixture.email, key: acme.key)
            let bearer = "Bearer \(acme.key)"
            let key = ("Idempotency-Key", "radius-127.0.0.1-1812-0c0d")
            let code = TrustWhereFeaturesMeetTests.codeNow(phone.secret)
            let right = try await daemon.call(
                .POST, "/v1/approvals", json: Self.body(code: code), headers: [("Authorization", bearer), key])
            #expect(right.status == 200, "\(right.text)")
            let other = try await daemon.call(
                .POST, "/v1/approvals", json: Self.body(code: TrustWhereFeaturesMeetTests.wrong(phone.secret)),
                headers: [("Authorization", bearer), key])
            #expect(other.status == 409, "another code under the same key is another request: \(other.text)")
            let plain = try await daemon.call(.POST, "/v1/approvals", json: Self.body(), headers: [("Authorization", bearer), key])
            #expect(plain.status == 409, "\(plain.text)")
        }
    }

    /// trust.md, held resources follow their client: a waiting create whose caller hangs up
    /// gives its slot back at once, and leaves its approval as it is (nothing completed for nobody).
    @Test func aWaitingCreateWhoseCallerHangsUpGivesItsSlotBackAndUsesNothing() async throws {
        try await withTestDaemon(.socket) { daemon in
            let acme = try await Self.acmeWithUser(daemon)
            let device = try await daemon.enroll(Fixture.email, integrationKey: acme.key)
            let body = try JSONSerialization.data(withJSONObject: Self.body(wait: 50))
            var connection: RawConnection? = try RawConnection(port: try ConnectionLimitTests.port(daemon))
            connection?.send(
                "POST /v1/approvals HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(acme.key)\r\n"
                    + "Content-Type: application/json\r\nContent-Length: \(body.count)\r\n\r\n" + String(decoding: body, as: UTF8.self))
            let approval = try await Self.pending(daemon)
            try await daemon.waitForLongPolls(1)

            // act: the caller hangs up.
            connection = nil

            // check: the slot is back long before the wait's 50 s (the bound is a hang detector).
            let clock = ContinuousClock()
            let start = clock.now
            while try await daemon.longPollsWaiting() > 0 && clock.now - start < .seconds(25) {
                try await Task.sleep(for: .milliseconds(20))
            }
            #expect(try await daemon.longPollsWaiting() == 0)
            #expect(connection == nil)
            // Approved later, it is not completed by the call nobody is reading.
            #expect(try await daemon.respond(approval.id, apiKey: device.apiKey, decision: "approve", code: nil).status == 200)
            let status = try await daemon.v1(.GET, "/v1/approvals/\(approval.id)", key: acme.key)
            #expect(status["status"] == "approved", "\(status.text)")
        }
    }
}

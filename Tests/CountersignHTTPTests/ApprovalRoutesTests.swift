import CountersignCore
import CountersignHTTP
import CountersignRuntime
import CountersignStore
import Foundation
import NIOHTTP1
import TestSupport
import Testing

@testable import DaemonTestSupport

@Suite struct ApprovalRoutesTests {
    @Test func pendingListsOnlyTheUsersLiveRequestsWithRequesterContext() async throws {
        try await withTestDaemon(.socket) { daemon in
            try await daemon.createUser(Fixture.email, password: Fixture.password)
            try await daemon.createUser("bob@example.com", password: Fixture.password)
            let (ana, _) = try await daemon.login(Fixture.email, password: Fixture.password)
            let (bob, _) = try await daemon.login("bob@example.com", password: Fixture.password)
            let answer = try await daemon.call(
                .POST, "/api/mobile/auth/reset/phone/initiate", json: ["email": Fixture.email, "newPassword": Fixture.newPassword],
                headers: [("User-Agent", "PhotoSync/2.3 iOS/18.1")])
            let id = try #require(answer["requestId"])

            let list = try await daemon.call(.GET, "/api/mobile/approvals/pending", apiKey: ana)
            #expect(list.status == 200)
            let items = try #require(list.json["approvals"] as? [[String: any Sendable]])
            #expect(items.count == 1)
            let item = try #require(items.first)
            #expect(item["requestId"] as? String == id)
            #expect(item["action"] as? String == "password_reset")
            #expect(item["numberMatching"] as? Bool == true)
            #expect(item["status"] == nil)
            let requester = try #require(item["requester"] as? [String: any Sendable])
            #expect(requester["ip"] as? String == "127.0.0.1")
            #expect(requester["userAgent"] as? String == "PhotoSync/2.3 iOS/18.1")
            #expect(item["numberCode"] == nil)

            let bobs = try await daemon.call(.GET, "/api/mobile/approvals/pending", apiKey: bob)
            #expect((bobs.json["approvals"] as? [Any])?.isEmpty == true)

            let one = try await daemon.call(.GET, "/api/mobile/approvals/\(id)", apiKey: ana)
            #expect(one.status == 200)
            #expect(one["status"] == "pending")
            #expect(one["requestId"] == id)

            // Another user's request does not exist for Bob.
            let hidden = try await daemon.call(.GET, "/api/mobile/approvals/\(id)", apiKey: bob)
            #expect(hidden.status == 404)
            let bobAnswers = try await daemon.respond(id, apiKey: bob, code: nil)
            #expect(bobAnswers.status == 404)
            #expect(try await daemon.status(id)["status"] == "pending")

            #expect(try await daemon.call(.GET, "/api/mobile/approvals/pending").status == 401)
            #expect(try await daemon.call(.GET, "/api/mobile/approvals/pending", apiKey: "garbage").status == 401)
        }
    }

    @Test func numberMatchingRulesHold() async throws {
        try await withTestDaemon { daemon in
            try await daemon.createUser(Fixture.email, password: Fixture.password)
            let (key, _) = try await daemon.login(Fixture.email, password: Fixture.password)
            let (id, code) = try await daemon.initiate(Fixture.email, newPassword: Fixture.newPassword)
            let code2 = try #require(code)

            let noCode = try await daemon.respond(id, apiKey: key, code: nil)
            #expect(noCode.status == 400)
            #expect(noCode["message"]?.contains("numberCode") == true)
            #expect(try await daemon.status(id)["status"] == "pending")

            let badDecision = try await daemon.call(.POST, "/api/mobile/approvals/\(id)/respond", json: ["decision": "maybe"], apiKey: key)
            #expect(badDecision.status == 400)
            #expect(badDecision["message"]?.contains("decision") == true)

            let wrong = String((Int(code2)! - 10 + 1) % 90 + 10)
            let mismatch = try await daemon.respond(id, apiKey: key, code: wrong)
            #expect(mismatch.status == 422)
            #expect(mismatch["error"] == "number_mismatch")
            #expect(mismatch["status"] == "denied")
            let status = try await daemon.status(id)
            #expect(status["status"] == "denied")
            #expect(status["errorMessage"] != nil)

            // No second try.
            let retry = try await daemon.respond(id, apiKey: key, code: code2)
            #expect(retry.status == 409)
            #expect(retry["status"] == "denied")
        }
    }

    @Test func denyEndsTheRequest() async throws {
        try await withTestDaemon { daemon in
            try await daemon.createUser(Fixture.email, password: Fixture.password)
            let (key, _) = try await daemon.login(Fixture.email, password: Fixture.password)
            let (id, _) = try await daemon.initiate(Fixture.email, newPassword: Fixture.newPassword)
            let denied = try await daemon.respond(id, apiKey: key, decision: "deny", code: nil)
            #expect(denied.status == 200)
            #expect(denied["status"] == "denied")
            let late = try await daemon.complete(id)
            #expect(late.status == 409)
            #expect(late["status"] == "denied")
        }
    }

    @Test func numberMatchingCanBeTurnedOff() async throws {
        try await withTestDaemon(configure: { $0.broker.numberMatching = false }) { daemon in
            try await daemon.createUser(Fixture.email, password: Fixture.password)
            let (key, _) = try await daemon.login(Fixture.email, password: Fixture.password)
            let initiate = try await daemon.call(
                .POST, "/api/mobile/auth/reset/phone/initiate", json: ["email": Fixture.email, "newPassword": Fixture.newPassword])
            #expect(initiate.json["numberCode"] == nil)
            let id = try #require(initiate["requestId"])
            let one = try await daemon.call(.GET, "/api/mobile/approvals/\(id)", apiKey: key)
            #expect(one.json["numberMatching"] as? Bool == false)
            #expect(try await daemon.respond(id, apiKey: key, code: nil)["status"] == "approved")
        }
    }

    @Test func answeringAnExpiredRequestGets410() async throws {
        let clock = ManualClock()
        try await withTestDaemon(clock: clock) { daemon in
            try await daemon.createUser(Fixture.email, password: Fixture.password)
            let (key, _) = try await daemon.login(Fixture.email, password: Fixture.password)
            let (id, code) = try await daemon.initiate(Fixture.email, newPassword: Fixture.newPassword)
            clock.advance(60.1)
            let late = try await daemon.respond(id, apiKey: key, code: code)
            #expect(late.status == 410)
            #expect(late["status"] == "expired")
            #expect(try await daemon.call(.POST, "/api/mobile/auth/reset/phone/cancel/\(id)").status == 410)
            #expect(try await daemon.complete(id).status == 410)
            let pending = try await daemon.call(.GET, "/api/mobile/approvals/pending", apiKey: key)
            #expect((pending.json["approvals"] as? [Any])?.isEmpty == true)
        }
    }
}

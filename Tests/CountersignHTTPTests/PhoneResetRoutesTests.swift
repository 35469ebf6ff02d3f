import CountersignCore
import CountersignHTTP
import CountersignRuntime
import CountersignStore
import Foundation
import NIOHTTP1
import TestSupport
import Testing

@testable import DaemonTestSupport

@Suite struct PhoneResetRoutesTests {
    @Test func wholeFlowChangesThePasswordExactlyOnce() async throws {
        try await withTestDaemon { daemon in
            try await daemon.createUser(Fixture.email, password: Fixture.password)
            let (key, _) = try await daemon.login(Fixture.email, password: Fixture.password)

            // setup
            let initiate = try await daemon.call(
                .POST, "/api/mobile/auth/reset/phone/initiate", json: ["email": Fixture.email, "newPassword": Fixture.newPassword])
            #expect(initiate.status == 200)
            let id = try #require(initiate["requestId"])
            let code = try #require(initiate["numberCode"])
            #expect(Int(code).map { (10...99).contains($0) } == true)
            #expect(id.count >= 22)
            #expect(Set(initiate.json.keys) == ["requestId", "expiresAt", "numberCode"])

            let pending = try await daemon.status(id)
            #expect(pending.status == 200)
            #expect(pending["status"] == "pending")
            #expect(pending.json.keys.contains("errorMessage"))
            #expect(pending.json["errorMessage"] is NSNull)
            #expect(pending["expiresAt"] == initiate["expiresAt"])

            // act
            let early = try await daemon.complete(id)
            #expect(early.status == 409)
            #expect(early["status"] == "pending")

            let approved = try await daemon.respond(id, apiKey: key, code: code)
            #expect(approved.status == 200)
            #expect(approved["status"] == "approved")
            #expect(approved["requestId"] == id)
            #expect(try await daemon.status(id)["status"] == "approved")

            let completed = try await daemon.complete(id)
            #expect(completed.status == 200)
            #expect(completed.json["success"] as? Bool == true)
            let again = try await daemon.complete(id)
            #expect(again.status == 409)
            #expect(again["status"] == "completed")
            #expect(again["error"] == "conflict")

            // check
            let old = try await daemon.call(
                .POST, "/api/mobile/auth/login", json: ["email": Fixture.email, "password": Fixture.password, "deviceName": "d", "platform": "iOS"])
            #expect(old.status == 401)
            _ = try await daemon.login(Fixture.email, password: Fixture.newPassword)
        }
    }

    @Test func newPasswordIsValidated() async throws {
        try await withTestDaemon { daemon in
            let short = try await daemon.call(.POST, "/api/mobile/auth/reset/phone/initiate", json: ["email": Fixture.email, "newPassword": "short"])
            #expect(short.status == 400)
            #expect(short["error"] == "weak_password")
            #expect(short["message"]?.contains("8") == true)

            let long = try await daemon.call(
                .POST, "/api/mobile/auth/reset/phone/initiate", json: ["email": Fixture.email, "newPassword": String(repeating: "é", count: 40)])
            #expect(long.status == 400)
            #expect(long["error"] == "weak_password")
            #expect(long["message"]?.contains("72") == true)

            let badEmail = try await daemon.call(
                .POST, "/api/mobile/auth/reset/phone/initiate", json: ["email": "nobody", "newPassword": Fixture.newPassword])
            #expect(badEmail.status == 400)
            #expect(badEmail["message"]?.contains("email") == true)

            let missing = try await daemon.call(.POST, "/api/mobile/auth/reset/phone/initiate", json: ["email": Fixture.email])
            #expect(missing.status == 400)
            #expect(missing["message"]?.contains("newPassword") == true)
        }
    }

    @Test func unknownEmailGetsTheSameShapeAndNeverResolves() async throws {
        let clock = ManualClock()
        try await withTestDaemon(clock: clock) { daemon in
            try await daemon.createUser(Fixture.email, password: Fixture.password)
            let known = try await daemon.call(
                .POST, "/api/mobile/auth/reset/phone/initiate", json: ["email": Fixture.email, "newPassword": Fixture.newPassword])
            let unknown = try await daemon.call(
                .POST, "/api/mobile/auth/reset/phone/initiate", json: ["email": "ghost@example.com", "newPassword": Fixture.newPassword])
            #expect(known.status == 200)
            #expect(unknown.status == 200)
            #expect(Set(known.json.keys) == Set(unknown.json.keys))
            let id = try #require(unknown["requestId"])
            #expect(id.count == known["requestId"]?.count)
            #expect(try await daemon.status(id)["status"] == "pending")
            // Its 60 s pass on the daemon's clock: it expires like any request, never approved.
            clock.advance(60.1)
            #expect(try await daemon.status(id)["status"] == "expired")
        }
    }

    @Test func statusOfUnknownIdsAndBadWaitValues() async throws {
        try await withTestDaemon { daemon in
            let unknown = try await daemon.status("AAAAAAAAAAAAAAAAAAAAAA")
            #expect(unknown.status == 404)
            #expect(unknown["error"] == "not_found")
            #expect(try await daemon.status("not%20an%20id").status == 404)
            #expect(try await daemon.complete("AAAAAAAAAAAAAAAAAAAAAA").status == 404)
            #expect(try await daemon.call(.POST, "/api/mobile/auth/reset/phone/cancel/AAAAAAAAAAAAAAAAAAAAAA").status == 404)

            let (id, _) = try await daemon.initiate(Fixture.email, newPassword: Fixture.newPassword)
            for bad in ["31", "-1", "abc", "1.5"] {
                let answer = try await daemon.call(.GET, "/api/mobile/auth/reset/phone/status/\(id)?wait=\(bad)")
                #expect(answer.status == 400, "wait=\(bad)")
                #expect(answer["message"]?.contains("wait") == true)
            }
            #expect(try await daemon.status(id, wait: 0)["status"] == "pending")
        }
    }

    @Test func cancelEndsAPendingRequestOnly() async throws {
        try await withTestDaemon { daemon in
            try await daemon.createUser(Fixture.email, password: Fixture.password)
            let (key, _) = try await daemon.login(Fixture.email, password: Fixture.password)
            let (id, code) = try await daemon.initiate(Fixture.email, newPassword: Fixture.newPassword)
            let cancelled = try await daemon.call(.POST, "/api/mobile/auth/reset/phone/cancel/\(id)")
            #expect(cancelled.status == 200)
            #expect(cancelled["status"] == "cancelled")
            #expect(cancelled.json["success"] as? Bool == true)
            let twice = try await daemon.call(.POST, "/api/mobile/auth/reset/phone/cancel/\(id)")
            #expect(twice.status == 409)
            #expect(twice["status"] == "cancelled")
            let answer = try await daemon.respond(id, apiKey: key, code: code)
            #expect(answer.status == 409)
            #expect(answer["status"] == "cancelled")
            #expect(try await daemon.complete(id)["status"] == "cancelled")
        }
    }

    @Test func aNewRequestCancelsTheUsersPendingOne() async throws {
        try await withTestDaemon { daemon in
            try await daemon.createUser(Fixture.email, password: Fixture.password)
            let (key, _) = try await daemon.login(Fixture.email, password: Fixture.password)
            let (first, _) = try await daemon.initiate(Fixture.email, newPassword: Fixture.newPassword)
            let (second, _) = try await daemon.initiate(Fixture.email, newPassword: Fixture.newPassword)
            #expect(try await daemon.status(first)["status"] == "cancelled")
            #expect(try await daemon.status(second)["status"] == "pending")
            let list = try await daemon.call(.GET, "/api/mobile/approvals/pending", apiKey: key)
            let approvals = try #require(list.json["approvals"] as? [[String: any Sendable]])
            #expect(approvals.map { $0["requestId"] as? String } == [second])
        }
    }

    @Test func completionWindowPassingExpiresAnApprovedRequest() async throws {
        // The daemon's clock in the test's hand: the window passes when the test says, not after a real sleep.
        let clock = ManualClock()
        try await withTestDaemon(configure: { $0.broker.completionWindow = 1 }, clock: clock) { daemon in
            try await daemon.createUser(Fixture.email, password: Fixture.password)
            let (key, _) = try await daemon.login(Fixture.email, password: Fixture.password)
            let (id, code) = try await daemon.initiate(Fixture.email, newPassword: Fixture.newPassword)
            #expect(try await daemon.respond(id, apiKey: key, code: code).status == 200)
            clock.advance(1.1)
            let late = try await daemon.complete(id)
            #expect(late.status == 410)
            #expect(late["error"] == "expired")
            #expect(late["status"] == "expired")
            #expect(try await daemon.status(id)["status"] == "expired")
            // The old password still works: nothing was changed.
            _ = try await daemon.login(Fixture.email, password: Fixture.password)
        }
    }
}

import CountersignCore
import CountersignRuntime
import Foundation
import NIOHTTP1
import TestSupport
import Testing

@testable import DaemonTestSupport

/// `DELETE /v1/users/{email}`: an integration erases one of its own users; the user's live
/// approval ends as cancelled for the requester waiting on it and for the webhook, the
/// device's key stops, and the audit trail keeps the events under a pseudonym.
@Suite struct ErasureTests {
    @Test func anIntegrationErasesItsOwnUserAndTheWaitingRequesterHearsCancelled() async throws {
        let secret = Integration.newWebhookSecret()
        let receiver = WebhookReceiver(secret: secret)
        try await receiver.serve { url, _ in
            try await withTestDaemon { daemon in
                let acme = try await daemon.addIntegration("Acme", webhookURL: url)
                #expect(try await daemon.server.store.setWebhook(integrationID: acme.id, url: url, secret: secret))
                let other = try await daemon.addIntegration("Other")
                #expect(try await daemon.v1(.POST, "/v1/users", key: acme.key, json: ["email": Fixture.email]).status == 201)
                let device = try await daemon.enroll(Fixture.email, integrationKey: acme.key)
                let user = try #require(try await daemon.server.store.user(email: Fixture.email))
                #expect(try await daemon.server.store.grantUser(integrationID: other.id, userID: user.id, at: Date()))

                let created = try await daemon.v1(.POST, "/v1/approvals", key: acme.key, json: V1Fixture.approval)
                let id = try #require(created["approvalId"], "\(created.text)")
                let clock = ContinuousClock()
                let started = clock.now
                let waiting = Task { try await daemon.v1(.GET, "/v1/approvals/\(id)?wait=30", key: acme.key) }
                try await daemon.waitForLongPolls(1)

                // A grant lets another integration prompt and enroll, not erase.
                let refused = try await daemon.v1(.DELETE, "/v1/users/\(Fixture.email)", key: other.key)
                #expect(refused.status == 404 && refused["error"] == "user_not_found", "\(refused.text)")
                #expect(try await daemon.v1(.DELETE, "/v1/users/\(Fixture.email)", key: nil).status == 401)

                let erased = try await daemon.v1(.DELETE, "/v1/users/\(Fixture.email)", key: acme.key)
                #expect(erased.status == 200, "\(erased.text)")
                #expect(erased.json["devicesRemoved"] as? Int == 1 && erased.json["approvalsCancelled"] as? Int == 1, "\(erased.text)")
                // The requester waiting on the approval is woken (not left to its 30 s): the approval is gone
                // with the user, as on every node; the webhook tells that it was cancelled.
                let heard = try await waiting.value
                #expect(heard.status == 404 && heard["error"] == "not_found", "\(heard.status) \(heard.text)")
                #expect(clock.now - started < .seconds(25), "the waiting poll was not woken")
                try await receiver.wait { $0.events(of: id) == ["approval.cancelled"] }
                // The device's key is refused; the user is unknown to both integrations.
                #expect(try await daemon.call(.GET, "/api/mobile/approvals/pending", apiKey: device.apiKey).status == 401)
                #expect(try await daemon.v1(.GET, "/v1/users/\(Fixture.email)/devices", key: acme.key)["error"] == "user_not_found")
                #expect(try await daemon.v1(.GET, "/v1/users/\(Fixture.email)/devices", key: other.key)["error"] == "user_not_found")
                #expect(try await daemon.v1(.DELETE, "/v1/users/\(Fixture.email)", key: acme.key).status == 404)

                // The trail: every event of hers under one pseudonym, her email in none.
                let store = daemon.server.store
                let erasure = try #require(try await daemon.waitForAudit(.userErased).first)
                let pseudonym = try #require(erasure.email)
                #expect(pseudonym.hasPrefix("erased-") && erasure.detail?.contains("integration Acme") == true)
                let all = try await store.auditEvents(since: nil, email: nil, kind: nil, limit: 1000)
                #expect(!all.contains { $0.email == Fixture.email || ($0.detail ?? "").contains(Fixture.email) })
                let hers = try await store.auditEvents(since: nil, email: pseudonym, kind: nil, limit: 1000)
                #expect(Set(hers.map(\.kind)).isSuperset(of: [.userCreated, .deviceEnrolled, .requestCreated, .cancelled, .userErased]))
                // The email is free again: a new user, with nothing of the old one's.
                #expect(try await daemon.v1(.POST, "/v1/users", key: acme.key, json: ["email": Fixture.email]).status == 201)
                #expect(try await store.user(email: Fixture.email)?.id != user.id)
            }
        }
    }
}

import CountersignCore
import CountersignRuntime
import Foundation
import NIOHTTP1
import TestSupport
import Testing

@testable import DaemonTestSupport

/// `/v1/webhook`: a relying service sets its own URL, rotates its secret, sends a test event, lists its
/// deliveries and sends one again, behind its own key and on its own events only; a receiver that answers
/// 410 Gone disables the webhook until a URL is set again.
@Suite struct WebhookSelfServiceTests {
    @Test func aRelyingServiceManagesItsOwnWebhookAndSeesOnlyItsOwnEvents() async throws {
        let receiver = WebhookReceiver(secret: "")
        try await receiver.serve { url, _ in
            try await withTestDaemon { daemon in
                let acme = try await daemon.addIntegration("Acme")
                let other = try await daemon.addIntegration("Other")
                #expect(try await daemon.v1(.GET, "/v1/webhook", key: nil).status == 401)

                let none = try await daemon.v1(.GET, "/v1/webhook", key: acme.key)
                #expect(none.status == 200 && none.json["url"] is NSNull && none.json["enabled"] as? Bool == false, "\(none.text)")
                #expect(try await daemon.v1(.POST, "/v1/webhook/ping", key: acme.key).json["error"] as? String == "no_webhook")
                // Its key cannot point the daemon into the deployment's network: https to a public host only
                // (the operator's URL may name any host). Nothing is changed by a refusal.
                for refusedURL in [
                    "http://hooks.example.com/", url, "https://127.0.0.1/hook", "https://10.1.2.3/hook", "https://169.254.169.254/latest",
                    "https://[::1]/hook", "https://localhost/hook", "https://db.internal/hook",
                ] {
                    let refused = try await daemon.v1(.PUT, "/v1/webhook", key: acme.key, json: ["url": refusedURL])
                    #expect(refused.status == 400 && refused["error"] == "invalid_request", "\(refusedURL): \(refused.text)")
                }
                #expect(try await daemon.v1(.GET, "/v1/webhook", key: acme.key).json["url"] is NSNull)

                // The first URL is given a secret, shown in that answer only.
                let publicURL = "https://hooks.example.com/countersign"
                let set = try await daemon.v1(.PUT, "/v1/webhook", key: acme.key, json: ["url": publicURL])
                #expect(set.status == 200 && set["url"] == publicURL && set.json["enabled"] as? Bool == true, "\(set.text)")
                let secret = try #require(set["secret"])
                #expect(secret.hasPrefix("whsec_"))
                #expect(try await daemon.v1(.GET, "/v1/webhook", key: acme.key)["secret"] == nil)
                let again = try await daemon.v1(.PUT, "/v1/webhook", key: acme.key, json: ["url": publicURL])
                #expect(again.status == 200 && again["secret"] == nil, "\(again.text)")
                #expect(try await daemon.server.store.integration(id: acme.id)?.webhookPublicOnly == true)
                // The operator points it at the receiver on this host (`integration set-webhook`), keeping its secret.
                #expect(try await daemon.server.store.setWebhook(integrationID: acme.id, url: url, secret: secret))
                #expect(try await daemon.v1(.GET, "/v1/webhook", key: acme.key)["url"] == url)
                receiver.secret = secret

                // A test event, signed with that secret.
                let ping = try await daemon.v1(.POST, "/v1/webhook/ping", key: acme.key)
                #expect(ping.status == 202, "\(ping.text)")
                let pingID = try #require(ping["eventId"])
                try await receiver.wait { $0.accepted.contains { $0.id == pingID } }
                let arrived = try #require(receiver.accepted.first { $0.id == pingID })
                #expect(arrived.type == "webhook.ping")
                #expect((arrived.json["data"] as? [String: any Sendable])?["integration"] as? String == "Acme")
                #expect(arrived.json["timestamp"] is String)
                let pinged = try await daemon.waitForAudit(.webhookPinged)
                #expect(pinged.first?.detail?.contains("integration Acme") == true)

                // Its deliveries: the test event, with no approval; delivered once the daemon has the 200.
                var listed: [[String: any Sendable]] = []
                for _ in 0..<200 {
                    listed = try await daemon.v1(.GET, "/v1/webhook/deliveries", key: acme.key).json["deliveries"] as? [[String: any Sendable]] ?? []
                    if listed.first?["state"] as? String == "delivered" { break }
                    try await Task.sleep(for: .milliseconds(50))
                }
                #expect(listed.count == 1)
                #expect(listed.first?["eventId"] as? String == pingID && listed.first?["type"] as? String == "webhook.ping")
                #expect(listed.first?["state"] as? String == "delivered" && listed.first?["approvalId"] is NSNull)
                #expect(try await daemon.v1(.GET, "/v1/webhook/deliveries?limit=0", key: acme.key).status == 400)
                #expect(try await daemon.v1(.GET, "/v1/webhook/deliveries?failed=yes", key: acme.key).status == 400)

                // Another integration neither sees nor redelivers it.
                let theirs = try await daemon.v1(.GET, "/v1/webhook/deliveries", key: other.key)
                #expect((theirs.json["deliveries"] as? [Any])?.isEmpty == true, "\(theirs.text)")
                #expect(try await daemon.v1(.POST, "/v1/webhook/deliveries/\(pingID)/redeliver", key: other.key).status == 404)
                #expect(receiver.accepted.filter { $0.id == pingID }.count == 1)
                // Its own integration sends it again.
                #expect(try await daemon.v1(.POST, "/v1/webhook/deliveries/\(pingID)/redeliver", key: acme.key).status == 202)
                try await receiver.wait { $0.accepted.filter { $0.id == pingID }.count == 2 }

                // One test event waits at a time: the redelivered one ends (the daemon has its 200) before the next.
                func allDelivered() async throws {
                    for _ in 0..<400 {
                        let listed =
                            try await daemon.v1(.GET, "/v1/webhook/deliveries", key: acme.key).json["deliveries"] as? [[String: any Sendable]]
                        if listed?.allSatisfy({ $0["state"] as? String == "delivered" }) == true { return }
                        try await Task.sleep(for: .milliseconds(50))
                    }
                    Issue.record("deliveries not all delivered")
                }
                try await allDelivered()
                // A new secret, shown once; the old one signs beside it for a day: a receiver still on it accepts.
                let rotated = try await daemon.v1(.POST, "/v1/webhook/rotate-secret", key: acme.key)
                let newSecret = try #require(rotated["secret"], "\(rotated.text)")
                #expect(newSecret != secret && rotated["previousSecretUntil"] != nil)
                let second = try #require(try await daemon.v1(.POST, "/v1/webhook/ping", key: acme.key)["eventId"])
                try await receiver.wait { $0.accepted.contains { $0.id == second } }
                receiver.secret = newSecret
                try await allDelivered()
                let third = try #require(try await daemon.v1(.POST, "/v1/webhook/ping", key: acme.key)["eventId"])
                try await receiver.wait { $0.accepted.contains { $0.id == third } }

                // Removed: no URL, no test event.
                let removed = try await daemon.v1(.DELETE, "/v1/webhook", key: acme.key)
                #expect(removed.status == 200 && removed.json["url"] is NSNull, "\(removed.text)")
                #expect(try await daemon.v1(.POST, "/v1/webhook/ping", key: acme.key).status == 409)
            }
        }
    }

    @Test func aReceiverAnswering410DisablesTheWebhookOnceUntilItsURLIsSetAgain() async throws {
        let secret = Integration.newWebhookSecret()
        let receiver = WebhookReceiver(secret: secret)
        receiver.gone = true
        try await receiver.serve { url, _ in
            try await withTestDaemon { daemon in
                let acme = try await daemon.addIntegration("Acme", webhookURL: url)
                #expect(try await daemon.server.store.setWebhook(integrationID: acme.id, url: url, secret: secret))
                let first = try #require(try await daemon.v1(.POST, "/v1/webhook/ping", key: acme.key)["eventId"])
                let disabled = try await daemon.waitForAudit(.integrationWebhookDisabled)
                #expect(disabled.count == 1 && disabled.first?.detail?.contains("HTTP 410 Gone from 127.0.0.1") == true, "\(disabled)")
                _ = try await daemon.waitForAudit(.webhookFailed)
                // Not retried: one attempt, ended as failed.
                try await Task.sleep(for: .seconds(2))
                #expect(receiver.all.filter { $0.id == first }.map(\.status) == [410])
                let shown = try await daemon.v1(.GET, "/v1/webhook", key: acme.key)
                #expect(shown.json["enabled"] as? Bool == false && shown["disabledReason"]?.contains("410") == true, "\(shown.text)")
                #expect(shown["disabledAt"] != nil && shown["url"] == url)
                let failed =
                    try await daemon.v1(.GET, "/v1/webhook/deliveries?failed=true", key: acme.key).json["deliveries"] as? [[String: any Sendable]]
                #expect(failed?.map { $0["state"] as? String } == ["failed"])
                #expect(try await daemon.v1(.POST, "/v1/webhook/ping", key: acme.key)["error"] == "webhook_disabled")
                // A redelivery while disabled is not posted.
                #expect(try await daemon.v1(.POST, "/v1/webhook/deliveries/\(first)/redeliver", key: acme.key).status == 202)
                _ = try await daemon.waitForAudit(.webhookFailed) { $0.count >= 2 }
                #expect(receiver.all.filter { $0.id == first }.count == 1)

                // Setting a URL again enables the webhook: over the API, and as the operator does.
                let set = try await daemon.v1(.PUT, "/v1/webhook", key: acme.key, json: ["url": "https://hooks.example.com/v2"])
                #expect(set.json["enabled"] as? Bool == true && set.json["disabledAt"] is NSNull, "\(set.text)")
                receiver.gone = false
                #expect(try await daemon.server.store.setWebhook(integrationID: acme.id, url: url, secret: secret))
                let next = try #require(try await daemon.v1(.POST, "/v1/webhook/ping", key: acme.key)["eventId"])
                try await receiver.wait { $0.accepted.contains { $0.id == next } }
                #expect(try await daemon.server.store.auditEvents(since: nil, email: nil, kind: .integrationWebhookDisabled, limit: 10).count == 1)

                // An approval's event is listed with the approval it tells of.
                _ = try await daemon.v1(.POST, "/v1/users", key: acme.key, json: ["email": Fixture.email])
                _ = try await daemon.enroll(Fixture.email, integrationKey: acme.key)
                let approval = try await WebhookTests.create(daemon, acme.key)
                #expect(try await daemon.v1(.POST, "/v1/approvals/\(approval.id)/cancel", key: acme.key).status == 200)
                try await receiver.wait { $0.events(of: approval.id) == ["approval.cancelled"] }
                let listed =
                    try await daemon.v1(.GET, "/v1/webhook/deliveries?limit=1", key: acme.key).json["deliveries"] as? [[String: any Sendable]]
                #expect(listed?.first?["approvalId"] as? String == approval.id && listed?.first?["type"] as? String == "approval.cancelled")
            }
        }
    }
}

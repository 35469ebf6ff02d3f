import CountersignCore
import CountersignRuntime
import CountersignWebhooks
import Foundation
import GRDB
import NIOHTTP1
import TestSupport
import Testing

@testable import DaemonTestSupport

#if canImport(Glibc)
import Glibc
#endif

/// Webhooks against a receiver on 127.0.0.1 that checks each signature.
@Suite struct WebhookTests {
    /// A daemon with one integration whose webhook points at `url`, a user and an enrolled device.
    static func setUp(_ daemon: TestDaemon, webhookURL: String) async throws -> (key: String, secret: String, deviceKey: String) {
        let acme = try await daemon.addIntegration("Acme", webhookURL: webhookURL)
        _ = try await daemon.v1(.POST, "/v1/users", key: acme.key, json: ["email": Fixture.email])
        let device = try await daemon.enroll(Fixture.email, integrationKey: acme.key)
        return (acme.key, try #require(acme.secret), device.apiKey)
    }

    /// An integration whose webhook is `url` signed with `secret`, a user, an enrolled device, and one approval cancelled: one event to send.
    static func cancelOneApproval(_ daemon: TestDaemon, webhookURL url: String, secret: String) async throws {
        let acme = try await daemon.addIntegration("Acme", webhookURL: url)
        #expect(try await daemon.server.store.setWebhook(integrationID: acme.id, url: url, secret: secret))
        _ = try await daemon.v1(.POST, "/v1/users", key: acme.key, json: ["email": Fixture.email])
        _ = try await daemon.enroll(Fixture.email, integrationKey: acme.key)
        let approval = try await create(daemon, acme.key)
        #expect(try await daemon.v1(.POST, "/v1/approvals/\(approval.id)/cancel", key: acme.key).status == 200)
    }

    static func create(_ daemon: TestDaemon, _ key: String, ttl: Int? = nil, action: String = "login") async throws -> (id: String, code: String?) {
        var body = V1Fixture.approval
        body["action"] = action
        if let ttl { body["ttl"] = ttl }
        let answer = try await daemon.v1(.POST, "/v1/approvals", key: key, json: body)
        guard answer.status == 201, let id = answer["approvalId"] else { throw TestFailure("create: \(answer.status) \(answer.text)") }
        return (id, answer["numberCode"])
    }

    /// approvals-api.md: every webhook delivery outcome is audited with the integration's name,
    /// also the ones decided before a send (an event past its delivery window).
    @Test func everyDeliveryOutcomeNamesTheIntegration() async throws {
        try await withTestDaemon { daemon in
            // Nothing listens on port 1: every attempt is refused.
            let (key, _, _) = try await Self.setUp(daemon, webhookURL: "http://127.0.0.1:1/hook")
            let approval = try await Self.create(daemon, key)
            #expect(try await daemon.v1(.POST, "/v1/approvals/\(approval.id)/cancel", key: key).status == 200)
            let retried = try await daemon.waitForAudit(.webhookRetried)
            #expect(retried.allSatisfy { $0.detail?.contains("integration Acme") == true }, "\(retried.map(\.detail))")
            // Its delivery window ends before the next attempt.
            try await DatabaseQueue(path: daemon.server.configuration.databasePath).write { db in
                try db.execute(sql: "UPDATE outbox SET deadline = 0 WHERE kind = 'webhook'")
            }
            let dropped = try await daemon.waitForAudit(.webhookDropped)
            #expect(dropped.first?.detail?.contains("deadline") == true, "\(dropped.map(\.detail))")
            #expect(dropped.first?.detail?.contains("integration Acme") == true, "\(dropped.map(\.detail))")
        }
    }

    @Test func oneSignedEventPerTransitionInOrderAndNoSecretInLogs() async throws {
        let secret = Integration.newWebhookSecret()
        let receiver = WebhookReceiver(secret: secret)
        let logs = LogCapture()
        try await receiver.serve { url, _ in
            try await withTestDaemon(logs: logs) { daemon in
                let acme = try await daemon.addIntegration("Acme", webhookURL: url)
                // The receiver checks with the secret the integration was given.
                #expect(try await daemon.server.store.setWebhook(integrationID: acme.id, url: url, secret: secret))
                _ = try await daemon.v1(.POST, "/v1/users", key: acme.key, json: ["email": Fixture.email])
                let device = try await daemon.enroll(Fixture.email, integrationKey: acme.key)

                let expiring = try await Self.create(daemon, acme.key, ttl: 10, action: "payout")
                let approved = try await Self.create(daemon, acme.key)
                #expect(try await daemon.respond(approved.id, apiKey: device.apiKey, code: approved.code).status == 200)
                #expect(try await daemon.v1(.POST, "/v1/approvals/\(approved.id)/complete", key: acme.key).status == 200)
                let denied = try await Self.create(daemon, acme.key, action: "sudo")
                #expect(try await daemon.respond(denied.id, apiKey: device.apiKey, decision: "deny", code: nil).status == 200)
                let cancelled = try await Self.create(daemon, acme.key, action: "export")
                #expect(try await daemon.v1(.POST, "/v1/approvals/\(cancelled.id)/cancel", key: acme.key).status == 200)
                // A newer approval of the same action replaces the pending one.
                let replaced = try await Self.create(daemon, acme.key, action: "export")
                _ = try await Self.create(daemon, acme.key, action: "export")

                // Bounds that are hang detectors: each approval's events go out on their own, and under a loaded
                // suite one delivery may be retried after its back-off while later ones have arrived.
                try await receiver.wait(timeout: .seconds(120)) { $0.events(of: expiring.id) == ["approval.expired"] }
                try await receiver.wait(timeout: .seconds(120)) { $0.events(of: replaced.id) == ["approval.cancelled"] }
                try await receiver.wait(timeout: .seconds(120)) {
                    $0.events(of: approved.id).count >= 2 && !$0.events(of: denied.id).isEmpty && !$0.events(of: cancelled.id).isEmpty
                }
                #expect(receiver.events(of: approved.id) == ["approval.approved", "approval.completed"])
                #expect(receiver.events(of: denied.id) == ["approval.denied"])
                #expect(receiver.events(of: cancelled.id) == ["approval.cancelled"])
                // No event on create, every signature valid, one id per event: a copy that came twice
                // (its first answer late on a loaded machine) is the same event, not a second one.
                #expect(receiver.all.allSatisfy { $0.signatureValid })
                let copies = Dictionary(grouping: receiver.all, by: \.id)
                #expect(copies.values.allSatisfy { Set($0.map { "\($0.approvalID) \($0.type)" }).count == 1 })
                #expect(Set(receiver.all.map { "\($0.approvalID) \($0.type)" }).count == copies.count)
                #expect(receiver.all.allSatisfy { $0.id.hasPrefix("evt_") })
                let completed = try #require(receiver.accepted.first { $0.type == "approval.completed" })
                let data = try #require(completed.json["data"] as? [String: any Sendable])
                #expect(data["user"] as? String == Fixture.email)
                #expect(data["action"] as? String == "login")
                #expect(data["status"] as? String == "completed")
                #expect(data["deviceId"] as? String == device.deviceID)
                #expect(data["deviceKeyBound"] as? Bool == false)
                let cancelledEvent = try #require(receiver.accepted.first { $0.approvalID == cancelled.id })
                let cancelledData = try #require(cancelledEvent.json["data"] as? [String: any Sendable])
                #expect(cancelledData["deviceId"] is NSNull)

                let audited = try await daemon.waitForAudit(.webhookDelivered)
                #expect(audited.contains { $0.detail?.contains("integration Acme") == true })
                for secret in [secret, acme.key, device.apiKey] { #expect(!logs.text.contains(secret)) }
            }
        }
    }

    @Test func aReceiverThatFailsThreeTimesGetsTheEventOnceAndRedeliverySendsItAgain() async throws {
        let secret = Integration.newWebhookSecret()
        let receiver = WebhookReceiver(secret: secret, failFirst: 3)
        try await receiver.serve { url, _ in
            try await withTestDaemon { daemon in
                try await Self.cancelOneApproval(daemon, webhookURL: url, secret: secret)

                try await receiver.wait { !$0.accepted.isEmpty }
                #expect(receiver.all.map(\.status) == [500, 500, 500, 200])
                #expect(Set(receiver.all.map(\.id)).count == 1)
                let event = try #require(receiver.accepted.first?.id)
                try await Task.sleep(for: .seconds(2))
                #expect(receiver.accepted.count == 1)
                let retried = try await daemon.waitForAudit(.webhookRetried) { $0.count >= 3 }
                #expect(retried.count == 3)

                // `countersign webhook redeliver` queues it again; the running daemon sends it. The receiver counts
                // its 200 before the daemon marks the delivery: wait for the mark (under load it comes late).
                _ = try await daemon.waitForAudit(.webhookDelivered) { !$0.isEmpty }
                #expect(try await daemon.server.store.redeliverWebhook(eventID: event, integrationID: nil, finishedOnly: false, now: Date()) != nil)
                try await receiver.wait { $0.accepted.count == 2 }
                #expect(receiver.accepted.map(\.id) == [event, event])
                // The receiver counts an arrival before its 200 reaches the daemon, which then marks the row.
                var states: [String] = []
                for _ in 0..<200 {
                    states = try await daemon.server.store.webhookDeliveries(integrationID: nil, failedOnly: false, limit: 10).map(\.state)
                    if states == ["delivered"] { break }
                    try await Task.sleep(for: .milliseconds(50))
                }
                #expect(states == ["delivered"])
                #expect(try await daemon.server.store.webhookDeliveries(integrationID: nil, failedOnly: true, limit: 10).isEmpty)
            }
        }
    }

    /// approvals-api.md: an attempt the receiver does not answer within 10 s is a timeout, retried.
    @Test func aReceiverThatDoesNotAnswerIsGivenUpAfterTenSecondsAndRetried() async throws {
        let secret = Integration.newWebhookSecret()
        let receiver = WebhookReceiver(secret: secret, stallFirst: 1, stall: .seconds(12))
        try await receiver.serve { url, _ in
            try await withTestDaemon { daemon in
                // Stamped before the event exists: the give-up comes at least 10 s after its send, later on a busy machine.
                let before = Date()
                try await Self.cancelOneApproval(daemon, webhookURL: url, secret: secret)

                try await receiver.wait { !$0.all.isEmpty }
                let retried = try await daemon.waitForAudit(.webhookRetried)
                #expect(retried.count == 1)
                #expect(retried.first?.detail?.contains("timed out") == true, "\(retried.map(\.detail))")
                let gaveUp = try #require(retried.first?.at).timeIntervalSince(before)
                #expect(gaveUp > 9, "gave up \(gaveUp) s after the event was made")
                // And before the receiver's 12 s were over: its first answer is recorded 0, never accepted.
                // The next attempt is answered: the event arrives, once, under the same id.
                try await receiver.wait { !$0.accepted.isEmpty }
                #expect(receiver.all.map(\.status) == [0, 200])
                #expect(Set(receiver.all.map(\.id)).count == 1)
            }
        }
    }

    @Test func eventsWaitForADownReceiverAndArriveInOrderWhenItReturns() async throws {
        let secret = Integration.newWebhookSecret()
        // A port that was free a moment ago, and nobody listens on now.
        let port = try await WebhookReceiver(secret: secret).serve { _, port in port }
        let url = "http://127.0.0.1:\(port)/hook"
        try await withTestDaemon { daemon in
            let acme = try await daemon.addIntegration("Acme", webhookURL: url)
            #expect(try await daemon.server.store.setWebhook(integrationID: acme.id, url: url, secret: secret))
            _ = try await daemon.v1(.POST, "/v1/users", key: acme.key, json: ["email": Fixture.email])
            let device = try await daemon.enroll(Fixture.email, integrationKey: acme.key)
            let approval = try await Self.create(daemon, acme.key)
            #expect(try await daemon.respond(approval.id, apiKey: device.apiKey, code: approval.code).status == 200)
            #expect(try await daemon.v1(.POST, "/v1/approvals/\(approval.id)/complete", key: acme.key).status == 200)
            // Nobody listens: the first event is retried, the second waits behind it.
            var waiting = try await daemon.server.store.webhookDeliveries(integrationID: nil, failedOnly: false, limit: 10)
            let polling = ContinuousClock.now
            while !waiting.contains(where: { $0.attempts >= 1 && $0.lastError != nil }) && ContinuousClock.now - polling < .seconds(60) {
                try await Task.sleep(for: .milliseconds(100))
                waiting = try await daemon.server.store.webhookDeliveries(integrationID: nil, failedOnly: false, limit: 10)
            }
            #expect(waiting.count == 2)
            #expect(waiting.allSatisfy { $0.state == "pending" })
            #expect(waiting.contains { $0.attempts >= 1 && $0.lastError != nil })
            #expect(try await daemon.server.store.webhookDeliveries(integrationID: nil, failedOnly: true, limit: 10).count == 1)

            // It comes back on a port of its own (the old one may have been taken meanwhile); the
            // webhook is pointed there, as `countersign integration set-webhook` does, its secret kept.
            let receiver = WebhookReceiver(secret: secret)
            try await receiver.serve { newURL, _ in
                #expect(try await daemon.server.store.setWebhook(integrationID: acme.id, url: newURL, secret: secret))
                try await receiver.wait { $0.accepted.count == 2 }
            }
            #expect(receiver.events(of: approval.id) == ["approval.approved", "approval.completed"])
        }
    }

    /// Standard Webhooks: one `v1,` signature per secret, each checks with its own secret alone.
    @Test func oneSignaturePerSecretEachValidAlone() {
        let old = Integration.newWebhookSecret()
        let new = Integration.newWebhookSecret()
        let body = Data(#"{"id":"evt_1"}"#.utf8)
        let header = WebhookSignature.header(secrets: [new, old], id: "evt_1", timestamp: 1_800_000_000, body: body)
        #expect(header.split(separator: " ").count == 2 && header.split(separator: " ").allSatisfy { $0.hasPrefix("v1,") })
        let at = Date(timeIntervalSince1970: 1_800_000_010)
        for secret in [old, new] {
            #expect(WebhookSignature.verify(id: "evt_1", timestamp: "1800000000", signature: header, secret: secret, body: body, now: at))
        }
        #expect(!WebhookSignature.verify(id: "evt_2", timestamp: "1800000000", signature: header, secret: new, body: body, now: at))
        #expect(
            !WebhookSignature.verify(
                id: "evt_1", timestamp: "1800000000", signature: header, secret: Integration.newWebhookSecret(), body: body, now: at))
        #expect(!WebhookSignature.verify(id: "evt_1", timestamp: "1800000000", signature: header, secret: new, body: body, now: at + 400))
    }
}

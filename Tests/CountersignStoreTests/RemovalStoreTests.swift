import CountersignCore
import Foundation
import PostgresTestSupport
import Testing

/// Erasing a user and deleting an integration, on both backends: one transaction each, live
/// requests cancelled first, nothing of the user left but audit events under a pseudonym.
extension StoreTests {
    @Test(arguments: Backend.available) func erasingAUserLeavesNothingOfThemButPseudonymousAuditEvents(backend: Backend) async throws {
        let store = try await open(backend)
        let now = Date()
        try await store.createIntegration(
            Integration(
                id: "int_1", name: "Acme", webhookURL: "https://hooks.example.com/", webhookSecret: "whsec_x", enabled: true, createdAt: now),
            apiKeyHash: "kh-1")
        let (ana, _) = try await store.ensureUser(email: "ana@example.com", integrationID: "int_1")
        let bob = try await store.createUser(email: "bob@example.com", passwordHash: "h")
        try await store.createEnrollment(codeHash: "ana-1", userID: ana.id, integrationID: "int_1", createdAt: now, expiresAt: now + 600)
        let phone = try #require(try await Self.enroll(store, "ana-1", now: now, token: "ana-phone"))
        try await store.createEnrollment(codeHash: "ana-2", userID: ana.id, integrationID: "int_1", createdAt: now, expiresAt: now + 600)
        try await store.replaceBypassCodes(userID: ana.id, codeHashes: ["bc-1"], forPasswordReset: false, expiresAt: now + 3600, now: now)
        // A live approval of the integration's, and one of Bob's that must stay.
        var request = pending("r-ana", user: ana)
        request.prompt = ApprovalPrompt(integrationID: "int_1", integrationName: "Acme", userEmail: ana.email, title: "t", body: "b", context: [:])
        let record = IdempotencyRecord(
            integrationID: "int_1", key: "k-1", requestHash: "h", approvalID: "r-ana", answer: Data("{}".utf8), createdAt: now)
        _ = try await store.insert(request, idempotency: record) { _ in nil }
        _ = try await store.insert(pending("r-bob", user: bob))
        // One made while her prompts were silenced: it names her as its subject alone.
        var silenced = pending("r-silent", user: ana)
        silenced.userID = nil
        silenced.subject = ana.id
        silenced.action = try #require(ApprovalAction(rawValue: "login"))
        _ = try await store.insert(silenced)
        // One that ended, its webhook event delivered and kept (for a redelivery), naming her.
        var ended = pending("r-ended", user: ana)
        ended.action = try #require(ApprovalAction(rawValue: "payout"))
        ended.prompt = request.prompt
        _ = try await store.insert(ended)
        var machine = ApprovalStateMachine(ended)
        guard case .persist(let cancel) = machine.cancel(at: now) else {
            Issue.record("cancel refused")
            return
        }
        #expect(
            try await store.apply(
                cancel, to: machine.request, event: item("evt_ended", kind: .webhook, reference: "r-ended", at: now), audit: nil,
                writeTime: { now }))
        #expect(try await store.claimOutbox(now: now, lease: 60, limit: 10).map(\.id) == ["evt_ended"])
        #expect(try await store.finishOutbox(id: "evt_ended", as: .delivered, detail: "200", at: now))
        #expect(try await store.webhookDeliveries(integrationID: nil, failedOnly: false, limit: 10).first?.payload != nil)
        try await store.append([
            AuditEvent(kind: .userCreated, userID: ana.id, email: ana.email, detail: "integration Acme"),
            AuditEvent(kind: .loginFailed, email: ana.email, detail: "no account for ana@example.com"),
            AuditEvent(kind: .userCreated, userID: bob.id, email: bob.email),
        ])

        let pseudonym = "erased-0123456789abcdef01234567"
        // Not another integration's to erase: nothing happens.
        #expect(
            try await store.eraseUser(userID: ana.id, ownedBy: "int_2", pseudonym: pseudonym, at: now, audit: AuditEvent(kind: .userErased)) == nil)
        #expect(try await store.user(email: "ana@example.com") != nil)
        let erased = try #require(
            try await store.eraseUser(
                userID: ana.id, ownedBy: "int_1", pseudonym: pseudonym, at: now,
                audit: AuditEvent(kind: .userErased, userID: ana.id, email: pseudonym)))
        #expect(erased.devices == 1 && erased.auditEvents == 4)
        #expect(
            Set(erased.cancelled.map(\.id)) == ["r-ana", "r-silent"] && erased.cancelled.allSatisfy { $0.from == .pending && $0.cause == .userErased }
        )
        #expect(try await store.request(id: "r-silent") == nil)
        #expect(try await store.request(id: "r-ended") == nil)
        // Nothing of hers is left: the user, her device and its key, her codes, her request and its idempotency record.
        #expect(try await store.user(email: "ana@example.com") == nil)
        #expect(try await store.device(id: phone.id) == nil)
        #expect(try await store.devices(userID: ana.id).isEmpty)
        #expect(try await Self.enroll(store, "ana-2", now: now) == nil)
        #expect(try await store.useBypassCode(userID: ana.id, codeHash: "bc-1", passwordReset: false, now: now) == false)
        #expect(try await store.request(id: "r-ana") == nil)
        #expect(try await store.idempotencyRecord(integrationID: "int_1", key: "k-1", since: now - 60) == nil)
        // Bob's are untouched.
        #expect(try await store.request(id: "r-bob")?.state == .pending)
        #expect(try await store.user(email: "bob@example.com")?.id == bob.id)
        // The integration hears that its approval was cancelled; the event that had ended lost its body (it named her).
        let events = try await store.webhookDeliveries(integrationID: "int_1", failedOnly: false, limit: 10)
        #expect(Set(events.map(\.id)).count == 2 && events.contains { $0.id == "evt_ended" })
        let onItsWay = try #require(events.first { $0.id != "evt_ended" })
        let event = try #require(onItsWay.payload.flatMap(WebhookEvent.Envelope.init))
        #expect(event.type == "approval.cancelled" && event.data.approvalId == "r-ana")
        #expect(events.first { $0.id == "evt_ended" }.map { $0.payload == nil } == true)
        #expect(try await store.redeliverWebhook(eventID: "evt_ended", integrationID: nil, finishedOnly: false, now: now) == nil)
        // The one on its way loses its body once it ends.
        let claimed = try await store.claimOutbox(now: now, lease: 60, limit: 10).map(\.id)
        #expect(claimed == [onItsWay.id])
        #expect(try await store.finishOutbox(id: onItsWay.id, as: .delivered, detail: "200", at: now))
        let delivered = try await store.webhookDeliveries(integrationID: "int_1", failedOnly: false, limit: 10)
        #expect(delivered.count == 2 && delivered.allSatisfy { $0.payload == nil && $0.state == "delivered" })
        // The trail keeps every event, her email nowhere in it; the pseudonym finds hers, and the erasure itself.
        let trail = try await store.auditEvents(since: nil, email: nil, kind: nil, limit: 100)
        #expect(!trail.contains { $0.email == "ana@example.com" || ($0.detail ?? "").contains("ana@example.com") }, "\(trail)")
        let hers = try await store.auditEvents(since: nil, email: pseudonym, kind: nil, limit: 100)
        #expect(hers.count == 5 && Set(hers.map(\.kind)) == [.userCreated, .loginFailed, .cancelled, .userErased], "\(hers.map(\.kind))")
        #expect(hers.contains { $0.detail == "no account for \(pseudonym)" })
        #expect(try await store.auditEvents(since: nil, email: "bob@example.com", kind: nil, limit: 100).count == 1)
        // Once.
        #expect(try await store.eraseUser(userID: ana.id, ownedBy: nil, pseudonym: pseudonym, at: now, audit: AuditEvent(kind: .userErased)) == nil)
    }

    @Test(arguments: Backend.available) func deletingAnIntegrationEndsItsKeyGrantsCodesEventsAndOwnerships(backend: Backend) async throws {
        let store = try await open(backend)
        let now = Date()
        for (id, name) in [("int_1", "Acme"), ("int_2", "Other")] {
            try await store.createIntegration(
                Integration(
                    id: id, name: name, webhookURL: "https://\(name.lowercased()).example.com/", webhookSecret: "whsec_x", enabled: true,
                    createdAt: now), apiKeyHash: "kh-\(id)")
        }
        let (ana, _) = try await store.ensureUser(email: "ana@example.com", integrationID: "int_1")
        let bob = try await store.createUser(email: "bob@example.com", passwordHash: "h")
        #expect(try await store.grantUser(integrationID: "int_1", userID: bob.id, at: now))
        #expect(try await store.grantUser(integrationID: "int_2", userID: bob.id, at: now))
        try await store.createEnrollment(codeHash: "ana-1", userID: ana.id, integrationID: "int_1", createdAt: now, expiresAt: now + 600)
        var request = pending("r-1", user: ana)
        request.prompt = ApprovalPrompt(integrationID: "int_1", integrationName: "Acme", userEmail: ana.email, title: "t", body: "b", context: [:])
        _ = try await store.insert(request)
        let acme = try #require(try await store.integration(id: "int_1"))
        let ping = try #require(WebhookEvent.ping(for: acme, at: now))
        #expect(try await store.queueWebhookPing(ping, integrationID: "int_1"))

        let deleted = try #require(
            try await store.deleteIntegration(id: "int_1", at: now, audit: AuditEvent(kind: .integrationDeleted, detail: "integration Acme")))
        #expect(deleted.cancelled == [CancelledRequest(id: "r-1", from: .pending, cause: .integrationDeleted)])
        #expect(deleted.usersReleased == 1 && deleted.grantsEnded == 1 && deleted.eventsDropped == 1)
        #expect(try await store.integration(id: "int_1") == nil)
        #expect(try await store.integration(apiKeyHash: "kh-int_1") == nil)
        #expect(try await store.request(id: "r-1")?.state == .cancelled)
        #expect(try await Self.enroll(store, "ana-1", now: now) == nil)
        // Its user stays, nobody's; the other integration's grant stays.
        #expect(try await store.user(email: "ana@example.com")?.ownerIntegrationID == nil)
        #expect(try await store.user(email: "bob@example.com", reachableBy: "int_2")?.id == bob.id)
        #expect(try await store.webhookDeliveries(integrationID: "int_1", failedOnly: true, limit: 10).map(\.state) == ["dropped"])
        #expect(try await store.auditEvents(since: nil, email: nil, kind: .integrationDeleted, limit: 10).count == 1)
        #expect(try await store.deleteIntegration(id: "int_1", at: now, audit: AuditEvent(kind: .integrationDeleted)) == nil)
    }
}

import CountersignCore
import CountersignSQL
import CountersignStore
import Foundation
import GRDB
import Logging
import PostgresNIO
import PostgresTestSupport
import Synchronization
import Testing

@testable import CountersignPostgres

/// More of the store suite, on both backends: outbox claims, the email
/// reset's tries, enrollment codes, idempotency keys, the audit trail and the
/// reads a cluster's broker makes. Two stores opened on one database stand for
/// two nodes racing.
extension StoreTests {
    func item(_ id: String, kind: OutboxKind = .mail, reference: String? = nil, at now: Date) -> OutboxItem {
        OutboxItem(
            id: id, kind: kind, reference: reference, userID: nil, payload: Data("{}".utf8), createdAt: now, nextAttemptAt: now,
            deadline: now.addingTimeInterval(3600))
    }

    @Test(arguments: Backend.available) func twoNodesClaimEachOutboxItemOnceAndALapsedLeaseFreesIt(backend: Backend) async throws {
        let database = try await newDatabase(backend)
        let nodeA = try await open(backend, database, node: "a")
        let nodeB = try await open(backend, database, node: "b")
        let now = Date()
        let reset = EmailResetTicket(
            id: "reset", userID: nil, email: "ana@example.com", codeHash: "c", tokenHash: "t", createdAt: now, expiresAt: now.addingTimeInterval(600))
        _ = try await nodeA.issueEmailReset(reset, mail: item("m0", at: now))
        for index in 1..<40 {
            let ticket = EmailResetTicket(
                id: "reset\(index)", userID: nil, email: "u\(index)@example.com", codeHash: "c\(index)", tokenHash: "t\(index)", createdAt: now,
                expiresAt: now.addingTimeInterval(600))
            _ = try await nodeB.issueEmailReset(ticket, mail: item("m\(index)", at: now))
        }
        // Both nodes claim at once, in small batches, until nothing is due.
        async let claimedByA = Self.claimAll(nodeA, now: now)
        async let claimedByB = Self.claimAll(nodeB, now: now)
        let (a, b) = try await (claimedByA, claimedByB)
        #expect(Set(a).isDisjoint(with: Set(b)))
        #expect(Set(a + b).count == 40 && a.count + b.count == 40)
        #expect(try await nodeA.outboxDepth()[.mail] == 40)
        // Node A "dies" holding its items: once the lease lapses, B takes them.
        #expect(try await nodeB.claimOutbox(now: now.addingTimeInterval(1), lease: 60, limit: 100).isEmpty)
        let retaken = try await nodeB.claimOutbox(now: now.addingTimeInterval(61), lease: 60, limit: 100)
        #expect(retaken.count == 40)
        #expect(retaken.allSatisfy { $0.attempts == 2 })
        for item in retaken { #expect(try await nodeB.finishOutbox(id: item.id, as: .delivered, detail: "250", at: now)) }
        #expect(try await nodeA.finishOutbox(id: retaken[0].id, as: .delivered, detail: "250", at: now) == false)
        #expect(try await nodeA.outboxDepth()[.mail, default: 0] == 0)
    }

    /// Enrolls a device named `token` with the code `codeHash`, as `POST /auth/enroll` does.
    static func enroll(
        _ store: any CountersignStorage, _ codeHash: String, now: Date, token: String? = nil, maxDevices: Int = 20
    )
        async throws -> Device?
    {
        try await store.enroll(codeHash: codeHash, now: now, maxDevices: maxDevices) { userID in
            DeviceRegistration(
                userID: userID, name: token ?? "phone", platform: "android", push: token.map(PushAddress.fcm), apiKeyHash: "key-\(UUID().uuidString)",
                publicKey: nil, mayApproveResets: false)
        }?.device
    }

    /// trust.md: an integration reaches the users it created and those granted
    /// to it; codes work only while it is enabled and reaches the user; a
    /// refused enrollment leaves its code usable; an enrolled device may not
    /// answer resets until the password is given on it.
    @Test(arguments: Backend.available) func integrationsReachOnlyTheirOwnUsers(backend: Backend) async throws {
        let store = try await open(backend)
        let now = Date()
        for (id, name) in [("int_1", "Acme"), ("int_2", "Other")] {
            try await store.createIntegration(
                Integration(id: id, name: name, webhookURL: nil, webhookSecret: nil, enabled: true, createdAt: now), apiKeyHash: "kh-\(id)")
        }
        let ana = try await store.createUser(email: "ana@example.com", passwordHash: "h")
        let (bob, _) = try await store.ensureUser(email: "bob@example.com", integrationID: "int_2")
        // act & check: neither a password user nor another integration's user is reachable.
        #expect(try await store.user(email: "ana@example.com", reachableBy: "int_1") == nil)
        #expect(try await store.user(email: "bob@example.com", reachableBy: "int_1") == nil)
        #expect(try await store.user(email: "bob@example.com", reachableBy: "int_2")?.id == bob.id)
        // A code issued for an unreachable user (say, before a grant was revoked) enrolls nothing.
        try await store.createEnrollment(codeHash: "ana-1", userID: ana.id, integrationID: "int_1", createdAt: now, expiresAt: now + 600)
        #expect(try await Self.enroll(store, "ana-1", now: now) == nil)
        #expect(try await store.grantUser(integrationID: "int_1", userID: ana.id, at: now))
        #expect(try await store.grantUser(integrationID: "int_1", userID: ana.id, at: now) == false)
        #expect(try await store.user(email: "ana@example.com", reachableBy: "int_1")?.id == ana.id)
        try await store.createEnrollment(codeHash: "ana-2", userID: ana.id, integrationID: "int_1", createdAt: now, expiresAt: now + 600)
        // Her phone's push token: an enrollment does not take her phone over, it gets a device of its own, pull only.
        let phone = try await store.registerDevice(
            userID: ana.id, name: "phone", platform: "ios", push: .fcm("ana-phone"), apiKeyHash: "phone-key", publicKey: nil)
        let enrolled = try #require(try await Self.enroll(store, "ana-2", now: now, token: "ana-phone"))
        #expect(enrolled.mayApproveResets == false)
        #expect(enrolled.id != phone.id && enrolled.push == nil)
        #expect(try await store.device(id: phone.id)?.mayApproveResets == true)
        #expect(try await store.device(apiKeyHash: "phone-key")?.id == phone.id)
        // The password given on the device (refresh-key) lets it answer resets.
        try await store.replaceAPIKey(deviceID: enrolled.id, apiKeyHash: "fresh", offlineSecret: nil)
        #expect(try await store.device(id: enrolled.id)?.mayApproveResets == true)
        // Revoking the grant voids the unused codes issued under it.
        try await store.createEnrollment(codeHash: "ana-3", userID: ana.id, integrationID: "int_1", createdAt: now, expiresAt: now + 600)
        #expect(try await store.revokeGrant(integrationID: "int_1", userID: ana.id))
        #expect(try await store.user(email: "ana@example.com", reachableBy: "int_1") == nil)
        _ = try await store.grantUser(integrationID: "int_1", userID: ana.id, at: now)
        #expect(try await Self.enroll(store, "ana-3", now: now) == nil)
        // Disabling, and rotating the key, void outstanding codes; enabling again does not revive them.
        try await store.createEnrollment(codeHash: "bob-1", userID: bob.id, integrationID: "int_2", createdAt: now, expiresAt: now + 600)
        try await store.createEnrollment(codeHash: "bob-2", userID: bob.id, integrationID: "int_2", createdAt: now, expiresAt: now + 600)
        #expect(try await store.setIntegrationEnabled(id: "int_2", enabled: false))
        #expect(try await store.setIntegrationEnabled(id: "int_2", enabled: true))
        #expect(try await Self.enroll(store, "bob-1", now: now) == nil)
        try await store.createEnrollment(codeHash: "bob-3", userID: bob.id, integrationID: "int_2", createdAt: now, expiresAt: now + 600)
        #expect(try await store.rotateIntegrationKey(id: "int_2", apiKeyHash: "kh-new"))
        #expect(try await Self.enroll(store, "bob-3", now: now) == nil)
        // A code asked for with the old key after the rotation (a request in flight) is not stored; with the new key it is.
        #expect(
            try await store.createEnrollment(
                codeHash: "bob-4", userID: bob.id, integrationID: "int_2", apiKeyHash: "kh-int_2", createdAt: now, expiresAt: now + 600)
                == false)
        #expect(
            try await store.createEnrollment(
                codeHash: "bob-5", userID: bob.id, integrationID: "int_2", apiKeyHash: "kh-new", createdAt: now, expiresAt: now + 600))
        #expect(try await Self.enroll(store, "bob-5", now: now) != nil)
    }

    /// A rotated webhook secret keeps signing until its overlap ends; a secret
    /// replaced with `set-webhook` (or the webhook removed) ends it at once.
    @Test(arguments: Backend.available) func aRotatedWebhookSecretSignsBesideTheNewOneUntilItsOverlapEnds(backend: Backend) async throws {
        let store = try await open(backend)
        let now = Date()
        try await store.createIntegration(
            Integration(
                id: "int_1", name: "Acme", webhookURL: "https://hooks.example.com/", webhookSecret: "whsec_old", enabled: true, createdAt: now),
            apiKeyHash: "kh")
        #expect(try await store.rotateWebhookSecret(integrationID: "int_1", secret: "whsec_new", previousUntil: now + 86400))
        let rotated = try #require(try await store.integration(id: "int_1"))
        #expect(rotated.webhookSecrets(at: now) == ["whsec_new", "whsec_old"])
        #expect(rotated.webhookSecrets(at: now + 86401) == ["whsec_new"])
        // The URL changes, the secret stays: the overlap too.
        #expect(try await store.setWebhook(integrationID: "int_1", url: "https://hooks2.example.com/", secret: "whsec_new"))
        #expect(try await store.integration(id: "int_1")?.webhookSecrets(at: now) == ["whsec_new", "whsec_old"])
        // Replaced at once: the old ones stop.
        #expect(try await store.setWebhook(integrationID: "int_1", url: "https://hooks2.example.com/", secret: "whsec_third"))
        #expect(try await store.integration(id: "int_1")?.webhookSecrets(at: now) == ["whsec_third"])
        // No webhook, nothing to rotate.
        #expect(try await store.setWebhook(integrationID: "int_1", url: nil, secret: nil))
        #expect(try await store.rotateWebhookSecret(integrationID: "int_1", secret: "whsec_x", previousUntil: now + 86400) == false)
    }

    /// trust.md: a password changed any other way (`user passwd`) cancels the
    /// user's live phone resets in the same transaction, audited; a finished one stays as it was.
    @Test(arguments: Backend.available) func aPasswordSetByTheOperatorCancelsLivePhoneResets(backend: Backend) async throws {
        let store = try await open(backend)
        let now = Date()
        let user = try await store.createUser(email: "ana@example.com", passwordHash: "old")
        // Live for an hour: on a machine kept busy the test may take more than a request's minute.
        var pendingOne = pending("p1", user: user, at: now)
        pendingOne.expiresAt = now + 3600
        _ = try await store.insert(pendingOne)
        var approvedOne = pending("p2", user: user, at: now)
        approvedOne.expiresAt = now + 3600
        approvedOne.completionWindow = 3600
        approvedOne.subject = "other"
        _ = try await store.insert(approvedOne)
        var machine = ApprovalStateMachine(approvedOne)
        guard case .persist(let approval) = machine.respond(.approve, numberCode: "47", deviceID: "d1", at: now) else {
            Issue.record("approve refused")
            return
        }
        #expect(try await store.apply(approval, to: machine.request, event: nil, audit: nil, writeTime: { now }))

        try await store.setPassword(userID: user.id, passwordHash: "set-by-the-operator")

        #expect(try await store.request(id: "p1")?.state == .cancelled)
        #expect(try await store.request(id: "p2")?.state == .cancelled)
        #expect(try await store.request(id: "p2")?.newPasswordHash == nil)
        let trail = try await store.auditEvents(since: nil, email: nil, kind: .cancelled, limit: 10)
        #expect(trail.count == 2 && trail.allSatisfy { $0.detail == "password changed by the operator (user passwd)" })
        #expect(try await store.user(id: user.id)?.passwordHash == "set-by-the-operator")
    }

    /// trust.md: a user's devices are bounded; a refused enrollment creates
    /// nothing and leaves the code usable (one transaction).
    @Test(arguments: Backend.available) func aUsersDevicesAreBoundedAndARefusedEnrollmentKeepsItsCode(backend: Backend) async throws {
        let store = try await open(backend)
        let now = Date()
        try await store.createIntegration(
            Integration(id: "int_1", name: "Acme", webhookURL: nil, webhookSecret: nil, enabled: true, createdAt: now), apiKeyHash: "kh")
        let (user, _) = try await store.ensureUser(email: "ana@example.com", integrationID: "int_1")
        for index in 0..<2 {
            _ = try await store.registerDevice(
                DeviceRegistration(
                    userID: user.id, name: "p\(index)", platform: "ios", push: .fcm("tok-\(index)"), apiKeyHash: "k\(index)", publicKey: nil,
                    mayApproveResets: true), maxDevices: 2)
        }
        await #expect(throws: AccountError.tooManyDevices) {
            try await store.registerDevice(
                DeviceRegistration(
                    userID: user.id, name: "third", platform: "ios", push: .fcm("tok-3"), apiKeyHash: "k3", publicKey: nil, mayApproveResets: true),
                maxDevices: 2)
        }
        // The same push address again replaces its device (signed out, a new one made): still two, so no refusal.
        let held = try #require(try await store.devices(userID: user.id).first { $0.push == .fcm("tok-0") })
        let again = try await store.registerDevice(
            DeviceRegistration(
                userID: user.id, name: "p0 again", platform: "ios", push: .fcm("tok-0"), apiKeyHash: "k0b", publicKey: nil, mayApproveResets: true),
            maxDevices: 2)
        #expect(again.device.name == "p0 again")
        #expect(again.device.id != held.id)
        #expect(again.replaced?.id == held.id)
        #expect(try await store.device(id: held.id) == nil)
        #expect(try await store.device(apiKeyHash: "k0") == nil, "the replaced device's key is refused")
        try await store.createEnrollment(codeHash: "code", userID: user.id, integrationID: "int_1", createdAt: now, expiresAt: now + 600)
        await #expect(throws: AccountError.tooManyDevices) { try await Self.enroll(store, "code", now: now, token: "tok-9", maxDevices: 2) }
        #expect(try await store.devices(userID: user.id).count == 2)
        // Room made, the same code still works.
        let removed = try #require(try await store.devices(userID: user.id).first)
        #expect(try await store.deleteDevice(id: removed.id))
        #expect(try await Self.enroll(store, "code", now: now, token: "tok-9", maxDevices: 2) != nil)
    }

    /// trust.md: a proof of possession is used once by its meaning, whichever
    /// node sees it, and all of a request's proofs or none are recorded.
    @Test(arguments: Backend.available) func aProofIsUsedOnceByItsMeaningOnEveryNode(backend: Backend) async throws {
        let database = try await newDatabase(backend)
        let nodes = [try await open(backend, database, node: "a"), try await open(backend, database, node: "b")]
        let now = Date()
        let first = ProofUse(deviceID: "d1", thumbprint: "k1", issuedAt: 100)
        let second = ProofUse(deviceID: "d1", thumbprint: "k2", issuedAt: 100)
        #expect(try await nodes[0].useProofs([first], until: now + 600, now: now))
        #expect(try await nodes[1].useProofs([first], until: now + 600, now: now) == false)
        // One used proof in a pair: nothing of the pair is recorded.
        #expect(try await nodes[1].useProofs([second, first], until: now + 600, now: now) == false)
        #expect(try await nodes[0].useProofs([second], until: now + 600, now: now))
        // Once it could no longer be accepted, it is forgotten.
        #expect(try await nodes[1].useProofs([first], until: now + 1200, now: now + 601))
        let racing = try await withThrowingTaskGroup(of: Bool.self) { group in
            for index in 0..<8 {
                group.addTask {
                    try await nodes[index % 2].useProofs([ProofUse(deviceID: "d2", thumbprint: "k", issuedAt: 7)], until: now + 600, now: now)
                }
            }
            return try await group.reduce(into: 0) { $0 += $1 ? 1 : 0 }
        }
        #expect(racing == 1)
    }

    static func claimAll(_ store: any CountersignStorage, now: Date) async throws -> [String] {
        var claimed: [String] = []
        while true {
            let batch = try await store.claimOutbox(now: now, lease: 60, limit: 3)
            if batch.isEmpty { return claimed }
            claimed += batch.map(\.id)
        }
    }

    @Test(arguments: Backend.available) func aWebhookEventWaitsForTheEarlierEventsOfItsApproval(backend: Backend) async throws {
        let store = try await open(backend)
        let now = Date()
        let integration = Integration(
            id: "int_1", name: "Admin", webhookURL: "https://hooks.example.com/", webhookSecret: "whsec_x", enabled: true, createdAt: now)
        try await store.createIntegration(integration, apiKeyHash: "kh")
        let user = try await store.createUser(email: "ana@example.com", passwordHash: "h")
        var request = pending("r1", user: user)
        request.prompt = ApprovalPrompt(integrationID: "int_1", integrationName: "Admin", userEmail: user.email, title: "t", body: "b", context: [:])
        _ = try await store.insert(request)
        var machine = ApprovalStateMachine(request)
        guard case .persist(let approval) = machine.respond(.approve, numberCode: "47", deviceID: "d1", at: now) else {
            Issue.record("approve refused")
            return
        }
        #expect(
            try await store.apply(
                approval, to: machine.request, event: item("evt_1", kind: .webhook, reference: "r1", at: now), audit: nil, writeTime: { now }))
        guard case .persist(let completion) = machine.complete(at: now) else {
            Issue.record("complete refused")
            return
        }
        #expect(
            try await store.apply(
                completion, to: machine.request, event: item("evt_2", kind: .webhook, reference: "r1", at: now), audit: nil, writeTime: { now })
        )
        #expect(try await store.claimOutbox(now: now, lease: 60, limit: 10).map(\.id) == ["evt_1"])
        #expect(try await store.claimOutbox(now: now, lease: 60, limit: 10).isEmpty)
        #expect(try await store.finishOutbox(id: "evt_1", as: .delivered, detail: "200", at: now))
        #expect(try await store.claimOutbox(now: now, lease: 60, limit: 10).map(\.id) == ["evt_2"])
        #expect(try await store.webhookDeliveries(integrationID: nil, failedOnly: false, limit: 10).map(\.id) == ["evt_2", "evt_1"])
        #expect(try await store.webhookDeliveries(integrationID: nil, failedOnly: true, limit: 10).isEmpty)
        // One being sent (leased) is not sent again beside it.
        #expect(try await store.redeliverWebhook(eventID: "evt_2", integrationID: nil, finishedOnly: false, now: now) == nil)
        #expect(try await store.redeliverWebhook(eventID: "evt_1", integrationID: nil, finishedOnly: false, now: now) == "r1")
        #expect(try await store.redeliverWebhook(eventID: "evt_none", integrationID: nil, finishedOnly: false, now: now) == nil)
    }

    /// `/v1/webhook`: an integration lists and redelivers its own events only, queues one test
    /// event at a time, and a receiver's 410 disables the webhook once, until a URL is set again.
    @Test(arguments: Backend.available) func anIntegrationSeesItsOwnDeliveriesAndA410DisablesItsWebhook(backend: Backend) async throws {
        let store = try await open(backend)
        let now = Date()
        for (id, name) in [("int_1", "Admin"), ("int_2", "Shop")] {
            try await store.createIntegration(
                Integration(
                    id: id, name: name, webhookURL: "https://\(name.lowercased()).example.com/", webhookSecret: "whsec_\(id)", enabled: true,
                    createdAt: now), apiKeyHash: "kh_\(id)")
        }
        let admin = try #require(try await store.integration(id: "int_1"))
        let shop = try #require(try await store.integration(id: "int_2"))
        let adminPing = try #require(WebhookEvent.ping(for: admin, at: now))
        #expect(adminPing.integrationID == "int_1" && adminPing.reference == "int_1")
        #expect(try await store.queueWebhookPing(adminPing, integrationID: "int_1"))
        // One test event waits at a time.
        #expect(!(try await store.queueWebhookPing(try #require(WebhookEvent.ping(for: admin, at: now)), integrationID: "int_1")))
        let shopPing = try #require(WebhookEvent.ping(for: shop, at: now.addingTimeInterval(1)))
        #expect(try await store.queueWebhookPing(shopPing, integrationID: "int_2"))
        #expect(try await store.webhookDeliveries(integrationID: "int_1", failedOnly: false, limit: 10).map(\.id) == [adminPing.id])
        #expect(try await store.webhookDeliveries(integrationID: "int_2", failedOnly: false, limit: 10).map(\.id) == [shopPing.id])
        #expect(try await store.webhookDeliveries(integrationID: nil, failedOnly: false, limit: 10).count == 2)
        // Claimed, the row names its integration.
        let claimed = try await store.claimOutbox(now: now.addingTimeInterval(2), lease: 60, limit: 10)
        #expect(Set(claimed.map(\.integrationID)) == ["int_1", "int_2"])
        #expect(try await store.finishOutbox(id: adminPing.id, as: .delivered, detail: "200", at: now))
        // Another integration's event is not found for it; its own is.
        #expect(try await store.redeliverWebhook(eventID: adminPing.id, integrationID: "int_2", finishedOnly: false, now: now) == nil)
        #expect(try await store.redeliverWebhook(eventID: adminPing.id, integrationID: "int_1", finishedOnly: false, now: now) == "int_1")

        let audit = AuditEvent(kind: .integrationWebhookDisabled, detail: "integration Admin: HTTP 410 Gone from admin.example.com")
        // A 410 from a URL no longer set disables nothing.
        #expect(!(try await store.disableWebhook(integrationID: "int_1", url: "https://old.example.com/", reason: "r", at: now, audit: audit)))
        #expect(
            try await store.disableWebhook(integrationID: "int_1", url: "https://admin.example.com/", reason: "HTTP 410 Gone", at: now, audit: audit))
        // Once: a second event's 410 leaves it as it is, and audits nothing more.
        #expect(
            !(try await store.disableWebhook(integrationID: "int_1", url: "https://admin.example.com/", reason: "again", at: now, audit: audit)))
        let disabled = try #require(try await store.integration(id: "int_1"))
        #expect(disabled.webhookDisabledAt != nil && disabled.webhookDisabledReason == "HTTP 410 Gone")
        #expect(try await store.auditEvents(since: nil, email: nil, kind: .integrationWebhookDisabled, limit: 10).count == 1)
        // No test event for a disabled webhook.
        #expect(!(try await store.queueWebhookPing(try #require(WebhookEvent.ping(for: disabled, at: now)), integrationID: "int_1")))
        // Setting a URL again enables it.
        #expect(try await store.setWebhook(integrationID: "int_1", url: "https://admin.example.com/v2", secret: "whsec_int_1"))
        let enabled = try #require(try await store.integration(id: "int_1"))
        #expect(enabled.webhookDisabledAt == nil && enabled.webhookDisabledReason == nil)
    }

    /// http-api.md and email-reset.md: one pending phone reset per user, one
    /// active code per address, however many nodes create them at once.
    @Test(arguments: Backend.available) func racingCreatesForOneSubjectLeaveOneLive(backend: Backend) async throws {
        let database = try await newDatabase(backend)
        let nodes = [try await open(backend, database, node: "a"), try await open(backend, database, node: "b")]
        let user = try await nodes[0].createUser(email: "ana@example.com", passwordHash: "old")
        for round in 0..<5 {
            let now = Date()
            try await withThrowingTaskGroup(of: Void.self) { group in
                for index in 0..<8 {
                    group.addTask {
                        _ = try await nodes[index % 2].insert(self.pending("r\(round)-\(index)", user: user, at: now), idempotency: nil) { _ in nil }
                        let ticket = EmailResetTicket(
                            id: "e\(round)-\(index)", userID: user.id, email: user.email, codeHash: "c\(round)-\(index)",
                            tokenHash: "t\(round)-\(index)", createdAt: now, expiresAt: now.addingTimeInterval(600))
                        _ = try await nodes[index % 2].issueEmailReset(ticket, mail: nil)
                    }
                }
                try await group.waitForAll()
            }
            let live = try await nodes[0].liveRequests().filter { $0.subject == user.id }
            if backend == .sqlite {
                // Two SQLiteStores on one file (a setup the daemon never runs: one process owns
                // a SQLite file) sometimes leave two live requests when the whole suite runs under
                // stress-ng; alone, under stress-ng too, they never have. Not understood yet: kept
                // visible as a known issue, not hidden. PostgreSQL, the shared backend, is held to it.
                withKnownIssue("two SQLite stores on one file, under the whole suite's load", isIntermittent: true) {
                    #expect(live.count == 1, "round \(round): \(live.map(\.id))")
                }
            } else {
                #expect(live.count == 1, "round \(round): \(live.map(\.id))")
            }
            let codes = try await (0..<8).asyncCount { try await nodes[0].emailReset(tokenHash: "t\(round)-\($0)")?.state == .active }
            #expect(codes == 1, "round \(round)")
        }
    }

    @Test(arguments: Backend.available) func racingTriesOfAnEmailCodeStopAtTheLimit(backend: Backend) async throws {
        let database = try await newDatabase(backend)
        let nodes = [try await open(backend, database, node: "a"), try await open(backend, database, node: "b")]
        let now = Date()
        let user = try await nodes[0].createUser(email: "ana@example.com", passwordHash: "old")
        let ticket = EmailResetTicket(
            id: "e1", userID: user.id, email: user.email, codeHash: "c", tokenHash: "t", createdAt: now, expiresAt: now.addingTimeInterval(600))
        _ = try await nodes[0].issueEmailReset(ticket, mail: nil)
        let taken = try await withThrowingTaskGroup(of: Int?.self) { group in
            for index in 0..<20 { group.addTask { try await nodes[index % 2].takeEmailResetTry(id: "e1", maxTries: 5, now: now) } }
            return try await group.reduce(into: [Int]()) { if let tries = $1 { $0.append(tries) } }
        }
        #expect(taken.sorted() == [1, 2, 3, 4, 5])
        let redeemed = try await withThrowingTaskGroup(of: Bool.self) { group in
            for index in 0..<10 {
                group.addTask { try await nodes[index % 2].redeemEmailReset(id: "e1", passwordHash: "new\(index)", now: now) != nil }
            }
            return try await group.reduce(into: 0) { $0 += $1 ? 1 : 0 }
        }
        #expect(redeemed == 1)
        #expect(try await nodes[1].user(id: user.id)?.passwordHash.hasPrefix("new") == true)
    }

    @Test(arguments: Backend.available) func anEnrollmentCodeAndAnIdempotencyKeyAreTakenOnce(backend: Backend) async throws {
        let database = try await newDatabase(backend)
        let nodes = [try await open(backend, database, node: "a"), try await open(backend, database, node: "b")]
        let now = Date()
        try await nodes[0].createIntegration(
            Integration(id: "int_1", name: "Admin", webhookURL: nil, webhookSecret: nil, enabled: true, createdAt: now), apiKeyHash: "kh")
        let (user, created) = try await nodes[0].ensureUser(email: "Ana@example.com", integrationID: "int_1")
        #expect(created)
        #expect(try await nodes[1].ensureUser(email: "ana@example.com", integrationID: "int_2").created == false)
        try await nodes[0].createEnrollment(
            codeHash: "code", userID: user.id, integrationID: "int_1", createdAt: now, expiresAt: now.addingTimeInterval(600))
        let redeemed = try await withThrowingTaskGroup(of: Bool.self) { group in
            for index in 0..<10 { group.addTask { try await Self.enroll(nodes[index % 2], "code", now: now, token: "t\(index)") != nil } }
            return try await group.reduce(into: 0) { $0 += $1 ? 1 : 0 }
        }
        #expect(redeemed == 1)
        #expect(try await nodes[0].devices(userID: user.id).count == 1)
        // approvals-api.md: a code is valid 10 minutes, not a second more.
        try await nodes[0].createEnrollment(
            codeHash: "late", userID: user.id, integrationID: "int_1", createdAt: now, expiresAt: now.addingTimeInterval(600))
        #expect(try await Self.enroll(nodes[1], "late", now: now.addingTimeInterval(601)) == nil)
        #expect(try await Self.enroll(nodes[1], "late", now: now.addingTimeInterval(599)) != nil)
        let inserted = try await withThrowingTaskGroup(of: Bool.self) { group in
            for index in 0..<8 {
                group.addTask {
                    var request = self.pending("i\(index)", user: user)
                    request.subject = "subject-\(index)"
                    let record = IdempotencyRecord(
                        integrationID: "int_1", key: "k", requestHash: "h", approvalID: request.id, answer: Data("a\(index)".utf8), createdAt: now)
                    do {
                        _ = try await nodes[index % 2].insert(request, idempotency: record, supersededEvent: { _ in nil })
                        return true
                    } catch is IdempotencyKeyTaken {
                        return false
                    }
                }
            }
            return try await group.reduce(into: 0) { $0 += $1 ? 1 : 0 }
        }
        #expect(inserted == 1)
        let record = try #require(try await nodes[1].idempotencyRecord(integrationID: "int_1", key: "k", since: now.addingTimeInterval(-1)))
        #expect(try await nodes[0].request(id: record.approvalID) != nil)
    }

    @Test(arguments: Backend.available) func theBrokersReadsOfPendingDueAndLiveRequests(backend: Backend) async throws {
        let store = try await open(backend)
        let ana = try await store.createUser(email: "ana@example.com", passwordHash: "h")
        let bob = try await store.createUser(email: "bob@example.com", passwordHash: "h")
        let now = Date()
        _ = try await store.insert(pending("old", user: ana, at: now.addingTimeInterval(-100)))
        var second = pending("new", user: ana, at: now.addingTimeInterval(-10))
        second.subject = "other"
        _ = try await store.insert(second)
        _ = try await store.insert(pending("bob", user: bob, at: now))
        #expect(try await store.pendingRequests(userID: ana.id, now: now).map(\.id) == ["new"])
        #expect(try await store.dueRequests(now: now, limit: 10).map(\.id) == ["old"])
        #expect(try await store.liveCounts() == [.pending: 3])
        #expect(store.isShared == (backend == .postgres))
    }

    @Test(arguments: Backend.available) func theAuditTrailFiltersByEmailKindAndTime(backend: Backend) async throws {
        let store = try await open(backend)
        let ana = try await store.createUser(email: "ana@example.com", passwordHash: "h")
        let t0 = Date(timeIntervalSince1970: 1_800_000_000)
        try await store.append([
            AuditEvent(at: t0, kind: .requestCreated, userID: ana.id, requestRef: "ref1", detail: "one"),
            AuditEvent(at: t0.addingTimeInterval(10), kind: .rateLimited, email: "ana@example.com", detail: "two"),
            AuditEvent(at: t0.addingTimeInterval(20), kind: .requestCreated, email: "bob@example.com", detail: "three"),
        ])
        #expect(try await store.auditEvents(since: nil, email: "ANA@example.com", kind: nil, limit: 10).map(\.detail) == ["one", "two"])
        #expect(try await store.auditEvents(since: nil, email: nil, kind: .requestCreated, limit: 10).map(\.detail) == ["one", "three"])
        #expect(try await store.auditEvents(since: t0.addingTimeInterval(5), email: nil, kind: nil, limit: 1).map(\.detail) == ["three"])
        #expect(try await store.auditEvents(requestRef: "ref1").first?.email == "ana@example.com")
        #expect(try await store.pruneAudit(before: t0.addingTimeInterval(15)) == 2)
    }

    /// The writer's batches go in several rows per INSERT: a batch longer than
    /// one INSERT takes is stored whole, in order, each value in its own row
    /// and column (none shifted into a neighbour, NULLs kept).
    @Test(arguments: Backend.available) func aBatchLongerThanOneInsertIsStoredWholeAndInOrder(backend: Backend) async throws {
        let store = try await open(backend)
        let at = Date(timeIntervalSince1970: 1_800_000_000)
        let count = AuditSQL.rowsPerInsert * 2 + 5
        let events = (0..<count).map { index in
            AuditEvent(
                at: at, kind: index.isMultiple(of: 2) ? .pushed : .approved, userID: "user-\(index % 7)",
                email: index.isMultiple(of: 3) ? nil : "e\(index)@example.com", deviceID: "device-\(index)",
                requestRef: index.isMultiple(of: 5) ? nil : "ref-\(index)",
                context: AuditContext(ip: "10.0.0.\(index % 250)", userAgent: index.isMultiple(of: 4) ? nil : "agent \(index)"),
                detail: "prompt: sent (fcm) \(index)", proof: index.isMultiple(of: 11) ? "proof-\(index)" : nil,
                proofKey: index.isMultiple(of: 11) ? "key-\(index)" : nil)
        }
        try await store.append(events)
        #expect(try await store.auditEvents(since: nil, email: nil, kind: nil, limit: 1_000) == events)
        try await store.append([events[0]])
        #expect(try await store.auditEvents(since: nil, email: nil, kind: nil, limit: 1_000).count == count + 1)
    }
}

extension Range where Bound == Int {
    /// How many of the range's numbers `test` holds for, one after another.
    func asyncCount(_ test: (Int) async throws -> Bool) async throws -> Int {
        var count = 0
        for index in self where try await test(index) { count += 1 }
        return count
    }
}

extension StoreTests {
    /// offline-codes.md as each backend keeps it: the sealed secret with its
    /// device (replaced by a key refresh), each step used once and never an
    /// older one, wrong codes counted only while pending, how a request was
    /// answered, and bypass codes used once within their validity and scope.
    @Test(arguments: Backend.available) func offlineSecretsStepsWrongCodesAndBypassCodesAreKept(backend: Backend) async throws {
        let store = try await open(backend)
        let now = Date()
        let user = try await store.createUser(email: "ana@example.com", passwordHash: "h")
        let device = try await store.registerDevice(
            DeviceRegistration(
                userID: user.id, name: "phone", platform: "ios", push: nil, apiKeyHash: "k1", publicKey: nil, mayApproveResets: true,
                offlineSecret: Data([1, 2, 3])),
            maxDevices: 20
        ).device
        #expect(try await store.devices(userID: user.id).first?.offlineSecret == Data([1, 2, 3]))
        let sealed = Data([1, 2, 3])
        #expect(try await store.useOfflineStep(deviceID: device.id, step: 100, sealed: sealed, resetRight: true))
        #expect(try await store.useOfflineStep(deviceID: device.id, step: 100, sealed: sealed, resetRight: true) == false)
        #expect(try await store.useOfflineStep(deviceID: device.id, step: 99, sealed: sealed, resetRight: true) == false)
        #expect(try await store.useOfflineStep(deviceID: device.id, step: 101, sealed: sealed, resetRight: true))
        // A new secret starts afresh, and a code checked against the old one no longer counts.
        try await store.replaceAPIKey(deviceID: device.id, apiKeyHash: "k2", offlineSecret: Data([4, 5]))
        #expect(try await store.device(id: device.id)?.offlineSecret == Data([4, 5]))
        #expect(try await store.useOfflineStep(deviceID: device.id, step: 200, sealed: sealed, resetRight: false) == false)
        #expect(try await store.useOfflineStep(deviceID: device.id, step: 50, sealed: Data([4, 5]), resetRight: true))
        try await store.replaceAPIKey(deviceID: device.id, apiKeyHash: "k3", offlineSecret: nil)
        #expect(try await store.useOfflineStep(deviceID: device.id, step: 500, sealed: Data([4, 5]), resetRight: false) == false)
        // A device an integration enrolled has no reset right: its step counts for an approval only.
        try await store.createIntegration(
            Integration(id: "int_1", name: "Acme", webhookURL: nil, webhookSecret: nil, enabled: true, createdAt: now), apiKeyHash: "kh")
        _ = try await store.grantUser(integrationID: "int_1", userID: user.id, at: now)
        try await store.createEnrollment(codeHash: "code", userID: user.id, integrationID: "int_1", createdAt: now, expiresAt: now + 600)
        let enrolled = try #require(
            try await store.enroll(codeHash: "code", now: now, maxDevices: 20) { userID in
                DeviceRegistration(
                    userID: userID, name: "tablet", platform: "android", push: nil, apiKeyHash: "k4", publicKey: nil, mayApproveResets: false,
                    offlineSecret: Data([6]))
            }?.device)
        #expect(try await store.useOfflineStep(deviceID: enrolled.id, step: 10, sealed: Data([6]), resetRight: true) == false)
        #expect(try await store.useOfflineStep(deviceID: enrolled.id, step: 10, sealed: Data([6]), resetRight: false))

        let request = pending("p1", user: user, at: now)
        _ = try await store.insert(request)
        #expect(try await store.takeCodeTry(requestID: "p1", limit: 3) == 1)
        #expect(try await store.takeCodeTry(requestID: "p1", limit: 3) == 2)
        #expect(try await store.takeCodeTry(requestID: "p1", limit: 3) == 3)
        #expect(try await store.takeCodeTry(requestID: "p1", limit: 3) == nil, "no try left")
        var machine = ApprovalStateMachine(request)
        guard case .persist(let approval) = machine.approveByCode(via: .offlineCode, deviceID: device.id, at: now) else {
            Issue.record("approve refused")
            return
        }
        #expect(try await store.apply(approval, to: machine.request, event: nil, audit: nil, writeTime: { now }))
        let stored = try await store.request(id: "p1")
        #expect(stored?.via == .offlineCode && stored?.respondingDeviceID == device.id && stored?.deviceKeyBound == false)
        #expect(try await store.takeCodeTry(requestID: "p1", limit: 10) == nil, "no longer pending: no try")

        try await store.replaceBypassCodes(userID: user.id, codeHashes: ["a", "b", "c"], forPasswordReset: false, expiresAt: now + 60, now: now)
        #expect(try await store.useBypassCode(userID: user.id, codeHash: "a", passwordReset: true, now: now) == false)
        #expect(try await store.useBypassCode(userID: user.id, codeHash: "a", passwordReset: false, now: now))
        #expect(try await store.useBypassCode(userID: user.id, codeHash: "a", passwordReset: false, now: now) == false)
        // Given back when the approval it was for lost: usable once more, once.
        try await store.restoreBypassCode(userID: user.id, codeHash: "a", usedAt: now + 1)
        #expect(try await store.useBypassCode(userID: user.id, codeHash: "a", passwordReset: false, now: now) == false, "not the use it gives back")
        try await store.restoreBypassCode(userID: user.id, codeHash: "a", usedAt: now)
        #expect(try await store.useBypassCode(userID: user.id, codeHash: "a", passwordReset: false, now: now))
        #expect(try await store.useBypassCode(userID: user.id, codeHash: "b", passwordReset: false, now: now + 60) == false)
        #expect(try await store.useBypassCode(userID: "someone else", codeHash: "b", passwordReset: false, now: now) == false)
        #expect(try await store.revokeBypassCodes(userID: user.id, now: now) == 2)
        #expect(try await store.useBypassCode(userID: user.id, codeHash: "b", passwordReset: false, now: now) == false)
        try await store.replaceBypassCodes(userID: user.id, codeHashes: ["d"], forPasswordReset: true, expiresAt: now + 60, now: now)
        #expect(try await store.useBypassCode(userID: user.id, codeHash: "d", passwordReset: true, now: now))
    }
}

extension StoreTests {
    /// push-providers.md: a device's address of any provider is kept as given,
    /// one device's token or endpoint stays its own, a dead one is disabled.
    @Test(arguments: Backend.available) func pushAddressesOfEveryProviderAreKeptOnBothBackends(backend: Backend) async throws {
        let store = try await open(backend)
        let ana = try await store.createUser(email: "ana@example.com", passwordHash: "h")
        let bob = try await store.createUser(email: "bob@example.com", passwordHash: "h")
        let apns = PushAddress.apns(token: String(repeating: "a1", count: 32), topic: "com.example.app", environment: .sandbox)
        let web = PushAddress.webPush(
            endpoint: "https://push.example.net/up/ana", key: Data([4] + [UInt8](repeating: 7, count: 64)), auth: Data(repeating: 1, count: 16))
        let phone = try await store.registerDevice(userID: ana.id, name: "iPhone", platform: "iOS", push: apns, apiKeyHash: "k1", publicKey: nil)
        let pixel = try await store.registerDevice(userID: ana.id, name: "Pixel", platform: "android", push: web, apiKeyHash: "k2", publicKey: nil)
        #expect(try await store.device(id: phone.id)?.push == apns)
        #expect(try await store.device(id: pixel.id)?.push == web)
        // Another user presenting Ana's endpoint gets a pull-only device; Ana's keeps it.
        let bobs = try await store.registerDevice(userID: bob.id, name: "Pixel", platform: "android", push: web, apiKeyHash: "k3", publicKey: nil)
        #expect(bobs.push == nil)
        #expect(try await store.device(id: pixel.id)?.push == web)
        // The same endpoint again for Ana replaces that device (a new one, the old one signed out), with the keys it brings now.
        var renewed = web
        renewed.webPushAuth = Data(repeating: 2, count: 16)
        let again = try await store.registerDevice(
            userID: ana.id, name: "Pixel 9", platform: "android", push: renewed, apiKeyHash: "k4", publicKey: nil)
        #expect(again.id != pixel.id)
        #expect(try await store.device(id: pixel.id) == nil)
        #expect(try await store.device(id: again.id)?.push == renewed)
        // A dead endpoint is disabled only while the device still holds it.
        try await store.disablePush(deviceID: phone.id, token: "someone else's")
        #expect(try await store.device(id: phone.id)?.pushEnabled == true)
        try await store.disablePush(deviceID: phone.id, token: apns.token)
        #expect(try await store.device(id: phone.id)?.pushEnabled == false)
        // A new address (another provider) brings push back.
        try await store.updatePushAddress(deviceID: phone.id, push: .fcm("fcm-now"))
        let updated = try await store.device(id: phone.id)
        #expect(updated?.push == .fcm("fcm-now") && updated?.pushEnabled == true)
        try await store.updatePushAddress(deviceID: phone.id, push: nil)
        #expect(try await store.device(id: phone.id)?.push == nil)
    }
}

extension StoreTests {
    /// A database a newer release migrated is refused, naming what this release does not know; nothing is changed.
    @Test(arguments: Backend.available) func aDatabaseFromANewerReleaseIsRefused(backend: Backend) async throws {
        let database = try await newDatabase(backend)
        let store = try await open(backend, database)
        if let postgres = store as? PostgresStore {
            try await postgres.rows("INSERT INTO schema_migrations (identifier, applied_at) VALUES ('v99-from-the-future', 0)")
        }
        try store.close()
        if backend == .sqlite {
            // GRDB's own table of applied migrations, as a newer release would leave it.
            let queue = try DatabaseQueue(path: database)
            try await queue.write { try $0.execute(sql: "INSERT INTO grdb_migrations (identifier) VALUES ('v99-from-the-future')") }
            try queue.close()
        }
        // `migrate --status` reads it without migrating: everything known applied, and the newer one named.
        let status =
            backend == .sqlite
            ? try SQLiteStore.migrationStatus(path: database)
            : try await PostgresStore.migrationStatus(configuration: try PostgresConfiguration(url: database), logger: Logger(label: "test"))
        #expect(status.unknown == ["v99-from-the-future"])
        #expect(status.pending.isEmpty)
        #expect(status.applied.first == "v1-accounts-and-approvals" && status.applied.last == "v13-webhook-self-service")
        do {
            _ = try await open(backend, database)
            Issue.record("a newer database was opened")
        } catch let error as NewerDatabaseError {
            #expect(error.unknown == ["v99-from-the-future"])
            #expect(error.newestKnown == "v13-webhook-self-service")
            #expect(error.description.contains("newer release"))
        }
    }

    /// trust.md: a user's wrong codes across routes are counted in the database per window;
    /// a try is given back only to its own window, and `user unlock` forgets them; a password
    /// ends an integration's ownership (audited) and voids its codes; reach is own, granted or all.
    @Test(arguments: Backend.available) func aUsersWrongCodesAndReachAreKept(backend: Backend) async throws {
        let store = try await open(backend)
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let ana = try await store.createUser(email: "ana@example.com", passwordHash: "h")
        guard case .taken(1, let start) = try await store.takeUserCodeTry(userID: ana.id, limit: 2, window: 86400, now: now) else {
            Issue.record("the first try was not taken")
            return
        }
        #expect(start == now)
        #expect(try await store.takeUserCodeTry(userID: ana.id, limit: 2, window: 86400, now: now + 1) == .taken(2, windowStart: now))
        #expect(try await store.takeUserCodeTry(userID: ana.id, limit: 2, window: 86400, now: now + 2) == .locked(until: now + 86400))
        // A try of another window is not given back to this one.
        try await store.giveBackUserCodeTry(userID: ana.id, windowStart: now - 86400)
        #expect(try await store.takeUserCodeTry(userID: ana.id, limit: 2, window: 86400, now: now + 3) == .locked(until: now + 86400))
        try await store.giveBackUserCodeTry(userID: ana.id, windowStart: now)
        #expect(try await store.takeUserCodeTry(userID: ana.id, limit: 2, window: 86400, now: now + 4) == .taken(2, windowStart: now))
        // The window ends: a new one begins.
        #expect(try await store.takeUserCodeTry(userID: ana.id, limit: 2, window: 86400, now: now + 86400) == .taken(1, windowStart: now + 86400))
        #expect(try await store.takeUserCodeTry(userID: ana.id, limit: 2, window: 86400, now: now + 86401) == .taken(2, windowStart: now + 86400))
        #expect(try await store.unlockCodes(userID: ana.id))
        #expect(try await store.takeUserCodeTry(userID: ana.id, limit: 2, window: 86400, now: now + 86402) == .taken(1, windowStart: now + 86402))
        #expect(try await store.takeUserCodeTry(userID: "nobody", limit: 2, window: 86400, now: now) == .noUser)

        // Reach: own, granted, or (all) any user with a device.
        try await store.createIntegration(
            Integration(id: "int_1", name: "Acme", webhookURL: nil, webhookSecret: nil, enabled: true, createdAt: now), apiKeyHash: "kh")
        let (bo, _) = try await store.ensureUser(email: "bo@example.com", integrationID: "int_1")
        #expect(try await store.integration("int_1", reaches: bo.id, all: false))
        #expect(try await store.integration("int_1", reaches: ana.id, all: false) == false)
        #expect(try await store.integration("int_1", reaches: ana.id, all: true) == false, "no device")
        _ = try await store.registerDevice(userID: ana.id, name: "p", platform: "ios", push: nil, apiKeyHash: "ka", publicKey: nil)
        #expect(try await store.integration("int_1", reaches: ana.id, all: true))
        #expect(try await store.user(email: "ana@example.com", promptableBy: "int_1")?.reached == false)
        #expect(try await store.user(email: "bo@example.com", promptableBy: "int_1")?.reached == true)
        // Whether each has a device comes in the same read: ana has one, bo none.
        #expect(try await store.user(email: "ana@example.com", promptableBy: "int_1")?.enrolled == true)
        #expect(try await store.user(email: "bo@example.com", promptableBy: "int_1")?.enrolled == false)
        #expect(try await store.setPromptsAllUsers(integrationID: "int_1", on: true))
        #expect(try await store.integration(id: "int_1")?.promptsAllUsers == true)

        // A password ends ownership, audited, and the integration's unused codes for the user die.
        try await store.createEnrollment(codeHash: "bo-1", userID: bo.id, integrationID: "int_1", createdAt: now, expiresAt: now + 600)
        try await store.setPassword(userID: bo.id, passwordHash: "h2")
        #expect(try await store.user(id: bo.id)?.ownerIntegrationID == nil)
        #expect(try await store.integration("int_1", reaches: bo.id, all: false) == false)
        #expect(try await Self.enroll(store, "bo-1", now: now) == nil)
        let ended = try await store.auditEvents(since: nil, email: nil, kind: .ownershipEnded, limit: 10)
        #expect(ended.map(\.userID) == [bo.id])
        #expect(ended.first?.detail == "integration Acme; password set by the operator (user passwd)")
    }
}

import CountersignCore
import CountersignRuntime
import CountersignWire
import Foundation
import NIOHTTP1
import TestSupport
import Testing
@testable import DaemonTestSupport

/// trust.md where features meet: who `/v1` reaches, a password ending an
/// integration's ownership, wrong codes counted where the guesser is under a
/// daily bound per user, a device replaced and never taken over, and names
/// that cannot reorder what a person reads.
@Suite struct TrustWhereFeaturesMeetTests {
    /// An approval for `email` by `key`: its status and body.
    static func approve(_ daemon: TestDaemon, _ email: String, key: String) async throws -> TestDaemon.Answer {
        try await daemon.v1(.POST, "/v1/approvals", key: key, json: ["user": email, "action": "login", "title": "Sign in"])
    }

    /// Enrolls a device for `email` through `key`'s integration; its id and offline secret.
    static func enrollWithSecret(_ daemon: TestDaemon, _ email: String, key: String) async throws -> (deviceID: String, secret: [UInt8]) {
        let issued = try await daemon.v1(.POST, "/v1/users/\(email)/enrollments", key: key)
        let code = try #require(issued["enrollmentCode"], "\(issued.text)")
        let enrolled = try await daemon.call(
            .POST, "/api/mobile/auth/enroll", json: ["enrollmentCode": code, "deviceName": "Phone", "platform": "iOS", "fcmToken": "t-\(email)"])
        let device = try #require(enrolled.json["device"] as? [String: any Sendable], "\(enrolled.text)")
        let offline = try #require(enrolled.json["offline"] as? [String: any Sendable])
        let secret = try #require(offline["secret"] as? String)
        return (try #require(device["id"] as? String), try #require(Base32.decode(secret)))
    }

    static func codeNow(_ secret: [UInt8]) -> String { TOTP.code(secret: secret, step: TOTP.step(at: Date())) }

    static func wrong(_ secret: [UInt8]) -> String {
        // Far from every accepted step's code: neither of the neighbours' either.
        let near = (-1...1).map { TOTP.code(secret: secret, step: TOTP.step(at: Date()) + Int64($0)) }
        return (0..<10).map { String(repeating: String($0), count: 6) }.first { !near.contains($0) }!
    }

    /// `/v1/approvals` reaches own, granted or (with prompt-all-users) every
    /// user with a device; anyone else is the same 404, device or not.
    @Test func anIntegrationPromptsOnlyTheUsersItReaches() async throws {
        try await withTestDaemon { daemon in
            try await daemon.createUser(Fixture.email, password: Fixture.password)
            _ = try await daemon.login(Fixture.email, password: Fixture.password)
            try await daemon.createUser("dee@example.com", password: Fixture.password)
            let acme = try await daemon.addIntegration("Acme")
            _ = try await daemon.v1(.POST, "/v1/users", key: acme.key, json: ["email": "cy@example.com"])

            // A password user with a phone, an unknown email, a password user without one: the same 404.
            for email in [Fixture.email, "nobody@example.com", "dee@example.com"] {
                let refused = try await Self.approve(daemon, email, key: acme.key)
                #expect(refused.status == 404, "\(email)")
                #expect(refused["error"] == "user_not_found", "\(email)")
            }
            // acme's own user without a device: it may know that.
            let unenrolled = try await Self.approve(daemon, "cy@example.com", key: acme.key)
            #expect(unenrolled.status == 422)
            #expect(unenrolled["error"] == "not_enrolled")

            // An integration the operator let prompt everyone reaches ana, not the device-less dee.
            let sso = try await daemon.addIntegration("SSO", promptsAllUsers: true)
            #expect(try await Self.approve(daemon, Fixture.email, key: sso.key).status == 201)
            let deviceless = try await Self.approve(daemon, "dee@example.com", key: sso.key)
            #expect(deviceless.status == 404)
            #expect(deviceless["error"] == "user_not_found")
            // It gives no listing or enrollment.
            #expect(try await daemon.v1(.GET, "/v1/users/\(Fixture.email)/devices", key: sso.key).status == 404)
            #expect(try await daemon.v1(.POST, "/v1/users/\(Fixture.email)/enrollments", key: sso.key).status == 404)

            // Creating a user acme cannot reach: 409, audited; its own or an unused email: as before.
            let taken = try await daemon.v1(.POST, "/v1/users", key: acme.key, json: ["email": Fixture.email])
            #expect(taken.status == 409)
            #expect(taken["error"] == "email_unavailable")
            #expect(try await daemon.v1(.POST, "/v1/users", key: acme.key, json: ["email": "cy@example.com"]).status == 200)
            #expect(try await daemon.v1(.POST, "/v1/users", key: sso.key, json: ["email": "cy@example.com"]).status == 409)
            let audited = try await daemon.waitForAudit(.emailUnavailable) { $0.count >= 2 }
            #expect(audited.map(\.detail) == ["integration Acme", "integration SSO"])
        }
    }

    @Test func userCreatesAreLimitedPerIntegration() async throws {
        try await withTestDaemon(configure: { $0.rateLimits[.userCreatesPerIntegration] = RateLimit(count: 2, window: 60) }) { daemon in
            let acme = try await daemon.addIntegration("Acme")
            var statuses: [Int] = []
            for index in 0..<3 {
                statuses.append(try await daemon.v1(.POST, "/v1/users", key: acme.key, json: ["email": "u\(index)@example.com"]).status)
            }
            #expect(statuses == [201, 201, 429])
            // Another integration has its own budget.
            let globex = try await daemon.addIntegration("Globex")
            #expect(try await daemon.v1(.POST, "/v1/users", key: globex.key, json: ["email": "u9@example.com"]).status == 201)
        }
    }

    /// A password set for an integration's user ends its ownership, in the
    /// same transaction, audited: the integration reaches it no more, its
    /// pending approval included.
    @Test func aPasswordEndsAnIntegrationsOwnership() async throws {
        try await withTestDaemon { daemon in
            let acme = try await daemon.addIntegration("Acme")
            _ = try await daemon.v1(.POST, "/v1/users", key: acme.key, json: ["email": Fixture.email])
            try await daemon.enroll(Fixture.email, integrationKey: acme.key)
            let pending = try #require(try await Self.approve(daemon, Fixture.email, key: acme.key)["approvalId"])
            #expect(try await daemon.v1(.GET, "/v1/approvals/\(pending)", key: acme.key).status == 200)

            let user = try #require(try await daemon.server.store.user(email: Fixture.email))
            #expect(user.ownerIntegrationID == acme.id)
            try await daemon.server.store.setPassword(userID: user.id, passwordHash: try await daemon.hasher.hash(Fixture.password))
            #expect(try await daemon.server.store.user(email: Fixture.email)?.ownerIntegrationID == nil)
            let ended = try await daemon.waitForAudit(.ownershipEnded)
            #expect(ended.first?.userID == user.id)
            #expect(ended.first?.detail?.hasPrefix("integration Acme") == true, "\(ended)")

            for (method, path) in [
                (HTTPMethod.GET, "/v1/approvals/\(pending)"), (.POST, "/v1/approvals/\(pending)/cancel"),
                (.POST, "/v1/approvals/\(pending)/complete"), (.GET, "/v1/users/\(Fixture.email)/devices"),
            ] {
                #expect(try await daemon.v1(method, path, key: acme.key).status == 404, "\(path)")
            }
            #expect(try await Self.approve(daemon, Fixture.email, key: acme.key).status == 404)
        }
    }

    /// One end user's wrong codes through a relying service lock out neither
    /// its other users nor the service; a user's wrong codes across routes are
    /// bounded per day, the lock told to their devices once, and lifted by the operator.
    /// trust.md: on `/v1`, wrong codes count per (integration, user), not per address: a relying service's
    /// backend is one address for all its users, so more wrong codes than the per-address limit (10 by default),
    /// spread over its users, lock no other user out. The limits here are the defaults.
    @Test func aServicesWrongCodesForManyUsersLockNoOtherUserOutAtTheDefaults() async throws {
        try await withTestDaemon { daemon in
            let acme = try await daemon.addIntegration("Acme")
            let emails = ["u1@example.com", "u2@example.com", "u3@example.com", "u4@example.com"]
            var secrets: [String: [UInt8]] = [:]
            for email in emails {
                _ = try await daemon.v1(.POST, "/v1/users", key: acme.key, json: ["email": email])
                secrets[email] = try await Self.enrollWithSecret(daemon, email, key: acme.key).secret
            }
            // 12 wrong codes from one address: 4 for each of three users (under each one's 5 tries and 10 per user).
            var wrongs: [Int] = []
            for email in emails.prefix(3) {
                let id = try #require(try await Self.approve(daemon, email, key: acme.key)["approvalId"])
                for _ in 0..<4 {
                    let secret = try #require(secrets[email])
                    wrongs.append(
                        try await daemon.v1(.POST, "/v1/approvals/\(id)/verify-code", key: acme.key, json: ["code": Self.wrong(secret)]).status)
                }
            }
            #expect(wrongs == Array(repeating: 400, count: 12), "\(wrongs)")
            // The fourth user's right code, through the same service and address: accepted.
            let id = try #require(try await Self.approve(daemon, emails[3], key: acme.key)["approvalId"])
            let right = try await daemon.v1(
                .POST, "/v1/approvals/\(id)/verify-code", key: acme.key, json: ["code": Self.codeNow(try #require(secrets[emails[3]]))])
            #expect(right.status == 200, "\(right.text)")
        }
    }

    @Test func wrongCodesCountWhereTheGuesserIsUnderADailyBoundPerUser() async throws {
        let pushes = RecordingPushSender()
        try await withTestDaemon(
            configure: {
                $0.rateLimits[.verifyCodePerUser] = RateLimit(count: 3, window: 900)
                $0.rateLimits[.wrongCodesPerUserPerDay] = RateLimit(count: 5, window: 86400)
            }, pushSender: pushes
        ) { daemon in
            let acme = try await daemon.addIntegration("Acme")
            let globex = try await daemon.addIntegration("Globex")
            for email in ["bo@example.com", "cy@example.com"] {
                _ = try await daemon.v1(.POST, "/v1/users", key: acme.key, json: ["email": email])
            }
            let bo = try await Self.enrollWithSecret(daemon, "bo@example.com", key: acme.key)
            let cy = try await Self.enrollWithSecret(daemon, "cy@example.com", key: acme.key)
            let boUser = try #require(try await daemon.server.store.user(email: "bo@example.com"))
            #expect(try await daemon.server.store.grantUser(integrationID: globex.id, userID: boUser.id, at: Date()))

            // bo's guesses through acme: 3 wrong codes, then acme's limit for bo (all from one address).
            let first = try #require(try await Self.approve(daemon, "bo@example.com", key: acme.key)["approvalId"])
            var statuses: [Int] = []
            for _ in 0..<4 {
                statuses.append(
                    try await daemon.v1(.POST, "/v1/approvals/\(first)/verify-code", key: acme.key, json: ["code": Self.wrong(bo.secret)]).status)
            }
            #expect(statuses == [400, 400, 400, 429])
            // cy, through the same service and address, is not locked out.
            let forCy = try #require(try await Self.approve(daemon, "cy@example.com", key: acme.key)["approvalId"])
            let cyAnswer = try await daemon.v1(.POST, "/v1/approvals/\(forCy)/verify-code", key: acme.key, json: ["code": Self.codeNow(cy.secret)])
            #expect(cyAnswer.status == 200, "\(cyAnswer.text)")

            // Two more wrong codes for bo through globex reach the day's bound of 5: bo is locked everywhere.
            let second = try #require(try await Self.approve(daemon, "bo@example.com", key: globex.key)["approvalId"])
            for _ in 0..<2 {
                #expect(
                    try await daemon.v1(.POST, "/v1/approvals/\(second)/verify-code", key: globex.key, json: ["code": Self.wrong(bo.secret)]).status
                        == 400)
            }
            let locked = try await daemon.v1(.POST, "/v1/approvals/\(second)/verify-code", key: globex.key, json: ["code": Self.codeNow(bo.secret)])
            #expect(locked.status == 429, "\(locked.text)")
            #expect(locked["error"] == "rate_limited")
            #expect(try await daemon.v1(.GET, "/v1/approvals/\(second)", key: globex.key)["status"] == "pending")
            #expect(try await daemon.waitForAudit(.codesLocked).first?.userID == boUser.id)
            // On the public reset route the lock answers as a wrong code does, as for an unknown email.
            let (reset, _) = try await daemon.initiate("bo@example.com", newPassword: Fixture.newPassword)
            let hidden = try await daemon.call(.POST, "/api/mobile/auth/reset/phone/verify-code/\(reset)", json: ["code": "1234567890"])
            #expect(hidden.status == 400)
            #expect(hidden["error"] == "invalid_code")
            try await PushFlowTests.eventually { pushes.deliveries.contains { $0.job == .codesLocked(userID: boUser.id) } }
            #expect(pushes.deliveries.filter { $0.job == .codesLocked(userID: boUser.id) }.map(\.deviceID) == [bo.deviceID])

            // The operator unlocks bo: the right code approves.
            #expect(try await daemon.server.store.unlockCodes(userID: boUser.id))
            let unlocked = try await daemon.v1(.POST, "/v1/approvals/\(second)/verify-code", key: globex.key, json: ["code": Self.codeNow(bo.secret)])
            #expect(unlocked.status == 200, "\(unlocked.text)")
            #expect(pushes.deliveries.filter { $0.job == .codesLocked(userID: boUser.id) }.count == 1, "told once")
        }
    }

    /// The phone-reset route takes reset bypass codes only: the phone's offline
    /// code there is a wrong code (the 5th denies the request), and wrong codes
    /// there are counted per client address.
    @Test func anOfflineCodeOnTheResetRouteIsAWrongCodeCountedPerAddress() async throws {
        try await withTestDaemon(configure: { $0.rateLimits[.verifyCodePerIP] = RateLimit(count: 6, window: 900) }) { daemon in
            try await daemon.createUser(Fixture.email, password: Fixture.password)
            let login = try await daemon.call(
                .POST, "/api/mobile/auth/login",
                json: ["email": Fixture.email, "password": Fixture.password, "deviceName": "Phone", "platform": "iOS"])
            let offline = try #require(login.json["offline"] as? [String: any Sendable])
            let text = try #require(offline["secret"] as? String)
            let secret = try #require(Base32.decode(text))
            let (id, _) = try await daemon.initiate(Fixture.email, newPassword: Fixture.newPassword)
            for attempt in 1...5 {
                // The right offline code of each moment, never accepted here.
                let answer = try await daemon.call(.POST, "/api/mobile/auth/reset/phone/verify-code/\(id)", json: ["code": Self.codeNow(secret)])
                #expect(answer.status == 400, "attempt \(attempt)")
                #expect(answer["error"] == "invalid_code")
            }
            #expect(try await daemon.status(id)["status"] == "denied")
            // The 6th wrong code from this address is the last the limit takes; the 7th is refused unchecked.
            let (next, _) = try await daemon.initiate(Fixture.email, newPassword: Fixture.newPassword)
            #expect(try await daemon.call(.POST, "/api/mobile/auth/reset/phone/verify-code/\(next)", json: ["code": "1234567890"]).status == 400)
            let limited = try await daemon.call(.POST, "/api/mobile/auth/reset/phone/verify-code/\(next)", json: ["code": "1234567890"])
            #expect(limited.status == 429)
            #expect(try await daemon.status(next)["status"] == "pending")
        }
    }

    /// A login that brings the push address one of the user's devices holds
    /// makes a new device and signs that one out: same address, new id, new
    /// key, announced; the old key is refused from then on.
    @Test func aLoginWithAHeldPushAddressReplacesTheDeviceAndNeverTakesItOver() async throws {
        let pushes = RecordingPushSender()
        try await withTestDaemon(pushSender: pushes) { daemon in
            try await daemon.createUser(Fixture.email, password: Fixture.password)
            let phone = try await daemon.login(Fixture.email, password: Fixture.password, device: "Phone", fcmToken: "token-phone")
            let tablet = try await daemon.login(Fixture.email, password: Fixture.password, device: "Tablet", fcmToken: "token-tablet")
            let other = try await daemon.login(Fixture.email, password: Fixture.password, device: "Other", fcmToken: "token-phone")

            #expect(other.deviceID != phone.deviceID)
            #expect(other.apiKey != phone.apiKey)
            #expect(try await daemon.call(.GET, "/api/mobile/device", apiKey: phone.apiKey).status == 401)
            let shown = try await daemon.call(.GET, "/api/mobile/device", apiKey: other.apiKey)
            #expect(shown["id"] == other.deviceID)
            let user = try #require(try await daemon.server.store.user(email: Fixture.email))
            #expect(try await daemon.server.store.devices(userID: user.id).map(\.id).sorted() == [tablet.deviceID, other.deviceID].sorted())
            let replaced = try await daemon.waitForAudit(.deviceReplaced)
            #expect(replaced.first?.deviceID == phone.deviceID)
            // Announced as any new device: the tablet hears of it.
            try await PushFlowTests.eventually {
                pushes.deliveries.contains {
                    if case .deviceAdded(_, other.deviceID, _, _, _) = $0.job { $0.deviceID == tablet.deviceID } else { false }
                }
            }
        }
    }

    /// Names a person reads cannot carry line separators or bidirectional
    /// controls (U+202E shows `gpj.exe` as `exe.jpg`): 400 naming the field.
    @Test func aDeviceNameWithBidiOrControlCharactersIsRefused() async throws {
        try await withTestDaemon { daemon in
            try await daemon.createUser(Fixture.email, password: Fixture.password)
            for name in ["Ana\u{202E}gpj.exe", "Ana\u{2066}phone", "Ana\nroot", "Ana\u{2028}x", "Ana\u{0007}"] {
                let answer = try await daemon.call(
                    .POST, "/api/mobile/auth/login",
                    json: ["email": Fixture.email, "password": Fixture.password, "deviceName": name, "platform": "iOS"])
                #expect(answer.status == 400, "\(name.unicodeScalars.map { String($0.value, radix: 16) })")
                #expect(answer["message"]?.contains("`deviceName`") == true, "\(answer.text)")
            }
            let user = try #require(try await daemon.server.store.user(email: Fixture.email))
            #expect(try await daemon.server.store.devices(userID: user.id).isEmpty, "nothing stored")
            #expect(
                try await daemon.call(
                    .POST, "/api/mobile/auth/login",
                    json: ["email": Fixture.email, "password": Fixture.password, "deviceName": "Ana's phone ☎︎ (عربي)", "platform": "iOS"]
                ).status
                    == 200)
        }
    }
}

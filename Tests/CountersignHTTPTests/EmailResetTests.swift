import CountersignCore
import CountersignMail
import CountersignRuntime
import Foundation
import GRDB
import Logging
import MailTestSupport
import NIOHTTP1
import TestSupport
import Testing

@testable import CountersignHTTP
@testable import DaemonTestSupport

/// The email reset against a real SMTP server on 127.0.0.1 (STARTTLS, AUTH).
@Suite struct EmailResetTests {
    @Test func aKnownEmailGetsOneMailWithACodeAndAWorkingLinkAndAnUnknownOneTheSameAnswerAndNoMail() async throws {
        try await withMailDaemon { daemon, smtp in
            // setup
            try await daemon.createUser(Fixture.email, password: Fixture.password)

            // act
            let known = try await daemon.emailInitiate(Fixture.email)
            let unknown = try await daemon.emailInitiate("nobody@example.com")

            // check: one answer for both.
            #expect(known.status == 200)
            #expect(known.bytes == unknown.bytes)
            #expect(known["message"] == "If an account exists for this address, a reset code is on its way.")
            let mails = try await smtp.waitForMails(1)
            try await Task.sleep(for: .seconds(1))
            #expect(try smtp.mails().count == 1, "exactly one mail, none for the unknown address")
            let mail = try #require(mails.first)
            #expect(mail.rcptTo == [Fixture.email])
            #expect(mail.to == Fixture.email)
            #expect(mail.from == MailFixture.from)
            #expect(mail.subject == "Your password reset code")
            #expect(mail.contentType == "multipart/alternative")
            #expect(mail.tls && mail.authenticated)
            let code = try #require(mail.code)
            #expect(ResetCode.isWellFormed(code))
            let token = try #require(mail.token)
            #expect(mail.link == "https://auth.example.test/reset-password?token=\(token)")
            for body in [try #require(mail.text), try #require(mail.html)] {
                #expect(body.contains(code))
                #expect(body.contains("reset-password?token=\(token)"))
                #expect(body.contains("15 minutes"))
                #expect(body.contains("ignore this mail; your password has not changed"))
            }
            // The link opens the form, for this account.
            let page = try await daemon.resetPage(token: token)
            #expect(page.status == 200)
            #expect(page.text.contains("<form"))
            #expect(page.text.contains("a***@example.com"))
            let requested = try await daemon.waitForAudit(.emailResetRequested)
            #expect(requested.count == 2)
            #expect(requested.contains { $0.email == "nobody@example.com" && $0.detail?.contains("unknown") == true })
            #expect(try await daemon.waitForAudit(.mailSent).count == 1)
        }
    }

    @Test func fiftyConcurrentVerifiesWithTheRightCodeSetThePasswordOnce() async throws {
        // The check below tries all 50 passwords at login: the login limits must not stop it before the winner's.
        let roomy = RateLimit(count: 1000, window: 3600)
        try await withMailDaemon(configure: {
            $0.rateLimits[.emailVerifyFailuresPerIP] = roomy
            $0.rateLimits[.loginFailuresPerEmail] = roomy
            $0.rateLimits[.loginFailuresPerIP] = roomy
        }) {
            daemon, smtp in
            try await daemon.createUser(Fixture.email, password: Fixture.password)
            #expect(try await daemon.emailInitiate(Fixture.email).status == 200)
            let code = try #require(try await smtp.waitForMails(1).first?.code)

            let statuses = try await withThrowingTaskGroup(of: (Int, String?).self) { group in
                for index in 0..<50 {
                    group.addTask {
                        let answer = try await daemon.emailVerify(Fixture.email, code: code, newPassword: "new password \(index)")
                        return (answer.status, answer["error"])
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(statuses.filter { $0.0 == 200 }.count == 1)
            #expect(statuses.filter { $0.0 == 400 && $0.1 == "invalid_code" }.count == 49)
            #expect(try await !daemon.canLogIn(Fixture.email, password: Fixture.password))
            // Whichever won, its password is the one in force now.
            var working = 0
            for index in 0..<50 where try await daemon.canLogIn(Fixture.email, password: "new password \(index)") { working += 1 }
            #expect(working == 1)
        }
    }

    @Test func fiveWrongCodesUseTheCodeAndItsLinkUp() async throws {
        try await withMailDaemon { daemon, smtp in
            try await daemon.createUser(Fixture.email, password: Fixture.password)
            #expect(try await daemon.emailInitiate(Fixture.email).status == 200)
            let mail = try #require(try await smtp.waitForMails(1).first)
            let code = try #require(mail.code)
            let wrong = code == "000000" ? "000001" : "000000"
            for _ in 0..<5 {
                let answer = try await daemon.emailVerify(Fixture.email, code: wrong, newPassword: Fixture.newPassword)
                #expect(answer.status == 400)
                #expect(answer["error"] == "invalid_code")
                #expect(answer["message"] == "That code is not valid. Request a new one.")
            }
            let right = try await daemon.emailVerify(Fixture.email, code: code, newPassword: Fixture.newPassword)
            #expect(right.status == 400)
            #expect(right["error"] == "invalid_code")
            #expect(try await daemon.resetPage(token: try #require(mail.token)).status == 410)
            #expect(try await daemon.canLogIn(Fixture.email, password: Fixture.password))
            #expect(try await daemon.waitForAudit(.resetCodeUsedUp).count == 1)
        }
    }

    @Test func parallelWrongCodesGetNoMoreThanFiveTries() async throws {
        try await withMailDaemon(configure: { $0.rateLimits[.emailVerifyFailuresPerIP] = RateLimit(count: 1000, window: 3600) }) {
            daemon, smtp in
            try await daemon.createUser(Fixture.email, password: Fixture.password)
            #expect(try await daemon.emailInitiate(Fixture.email).status == 200)
            let code = try #require(try await smtp.waitForMails(1).first?.code)
            let wrong = code == "000000" ? "000001" : "000000"
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<20 {
                    group.addTask { try await daemon.emailVerify(Fixture.email, code: wrong, newPassword: Fixture.newPassword).status }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(statuses == Array(repeating: 400, count: 20))
            #expect(try await daemon.emailVerify(Fixture.email, code: code, newPassword: Fixture.newPassword).status == 400)
            let wrongCode: (AuditEvent) -> Bool = { $0.email == Fixture.email && $0.detail?.contains("wrong code") == true }
            let refused = try await daemon.waitForAudit(.resetCodeRefused) { $0.filter(wrongCode).count >= 5 }
            #expect(refused.filter(wrongCode).count == 5, "exactly 5 codes were compared")
        }
    }

    @Test func initiationsArePerAddressLimited() async throws {
        try await withMailDaemon(configure: { $0.rateLimits[.emailResetPerIP] = RateLimit(count: 3, window: 3600) }) { daemon, _ in
            var statuses: [Int] = []
            for index in 0..<4 { statuses.append(try await daemon.emailInitiate("someone\(index)@example.com").status) }
            #expect(statuses == [200, 200, 200, 429])
        }
    }

    @Test func aNewCodeDropsTheUnsentMailAndAMailStillUnsentAtItsDeadlineIsDropped() async throws {
        // setup: an SMTP server that never answers (nothing listens on port 1), and the daemon's clock in the test's
        // hand: the code's deadline comes when the test moves the clock, not when a busy machine gets round to it.
        let clock = ManualClock()
        try await withTestDaemon(
            configure: {
                $0.email.smtp = try? SMTPConfiguration(url: "smtp://127.0.0.1:1", from: MailFixture.from)
                $0.email.codeTTL = 600
            }, clock: clock
        ) { daemon in
            try await daemon.createUser(Fixture.email, password: Fixture.password)

            // act
            #expect(try await daemon.emailInitiate(Fixture.email).status == 200)
            #expect(try await daemon.emailInitiate(Fixture.email).status == 200)

            // check: the first mail was dropped for the newer code; the second failed and waits for its next try,
            // which the clock, standing still, does not reach.
            let replaced = try await daemon.waitForAudit(.mailDropped)
            #expect(replaced.map(\.detail) == ["replaced by a newer code"])
            #expect(try await !daemon.waitForAudit(.mailRetried).isEmpty)
            #expect(try await daemon.server.store.auditEvents(since: nil, email: nil, kind: .mailDropped, limit: 10).count == 1)

            // Past the code's deadline on the daemon's clock, the mail still unsent is dropped.
            clock.advance(601)
            let dropped = try await daemon.waitForAudit(.mailDropped, timeout: .seconds(120)) { $0.count == 2 }
            #expect(dropped.count == 2)
            #expect(dropped.first?.detail == "replaced by a newer code")
            #expect(dropped.last?.detail?.contains("deadline") == true)
            let states = try await DatabaseQueue(path: daemon.server.configuration.databasePath).read { db in
                try String.fetchAll(db, sql: "SELECT state FROM outbox")
            }
            #expect(states == ["dropped", "dropped"])
            #expect(try await daemon.call(.GET, "/healthz")["mail"] == "degraded")
        }
    }

    @Test func aNewInitiateVoidsTheEarlierCodeAndLink() async throws {
        try await withMailDaemon { daemon, smtp in
            try await daemon.createUser(Fixture.email, password: Fixture.password)
            #expect(try await daemon.emailInitiate(Fixture.email).status == 200)
            let first = try #require(try await smtp.waitForMails(1).first)
            #expect(try await daemon.emailInitiate(Fixture.email).status == 200)
            let second = try #require(try await smtp.waitForMails(2).last)
            #expect(first.code != nil && first.token != second.token)

            #expect(try await daemon.emailVerify(Fixture.email, code: try #require(first.code), newPassword: Fixture.newPassword).status == 400)
            #expect(try await daemon.resetPage(token: try #require(first.token)).status == 410)
            #expect(try await daemon.verifyLink(token: try #require(first.token), newPassword: Fixture.newPassword).status == 400)
            #expect(try await daemon.emailVerify(Fixture.email, code: try #require(second.code), newPassword: Fixture.newPassword).status == 200)
            #expect(try await daemon.canLogIn(Fixture.email, password: Fixture.newPassword))
        }
    }

    @Test func theCodeAndTheLinkExpireAfterTheTTL() async throws {
        let clock = ManualClock()
        try await withMailDaemon(configure: { $0.email.codeTTL = 300 }, clock: clock) { daemon, smtp in
            try await daemon.createUser(Fixture.email, password: Fixture.password)
            #expect(try await daemon.emailInitiate(Fixture.email).status == 200)
            let mail = try #require(try await smtp.waitForMails(1).first)
            // The mail says what is left of the code's life when it leaves: at most 5 minutes.
            let left = try #require(mail.text?.firstMatch(of: /work once, for ([1-5]) minutes?\./)?.output.1)
            #expect(Int(left).map { (1...5).contains($0) } == true)
            // Five minutes pass on the daemon's clock.
            clock.advance(300.1)
            #expect(try await daemon.emailVerify(Fixture.email, code: try #require(mail.code), newPassword: Fixture.newPassword).status == 400)
            #expect(try await daemon.resetPage(token: try #require(mail.token)).status == 410)
            #expect(try await daemon.canLogIn(Fixture.email, password: Fixture.password))
        }
    }

    @Test func aWeakPasswordIsRefusedWithoutUsingUpTheCode() async throws {
        try await withMailDaemon { daemon, smtp in
            try await daemon.createUser(Fixture.email, password: Fixture.password)
            #expect(try await daemon.emailInitiate(Fixture.email).status == 200)
            let code = try #require(try await smtp.waitForMails(1).first?.code)
            // More weak tries than the code has tries.
            for _ in 0..<6 {
                let answer = try await daemon.emailVerify(Fixture.email, code: code, newPassword: "short")
                #expect(answer.status == 400)
                #expect(answer["error"] == "weak_password")
            }
            #expect(try await daemon.emailVerify(Fixture.email, code: code, newPassword: Fixture.newPassword).status == 200)
            // Used once: the same code again is refused, and so is its link.
            #expect(try await daemon.emailVerify(Fixture.email, code: code, newPassword: "another new password").status == 400)
            #expect(try await daemon.resetPage(token: try #require(try smtp.mails().first?.token)).status == 410)
            #expect(try await daemon.canLogIn(Fixture.email, password: Fixture.newPassword))
        }
    }

    @Test func aTemporaryFailureIsRetriedUntilDelivered() async throws {
        let email = "tempfail-ana@example.com"
        try await withMailDaemon { daemon, smtp in
            try await daemon.createUser(email, password: Fixture.password)
            #expect(try await daemon.emailInitiate(email).status == 200)
            let mails = try await smtp.waitForMails(1)
            #expect(mails.count == 1)
            #expect(mails.first?.rcptTo == [email])
            let retried = try await daemon.waitForAudit(.mailRetried)
            #expect(retried.count == 1)
            #expect(retried.first?.detail?.contains("451") == true)
            #expect(try await daemon.waitForAudit(.mailSent).count == 1)
            let health = try await daemon.call(.GET, "/healthz")
            #expect(health["mail"] == "ok")
        }
    }

    @Test func aPermanentFailureIsNotRetriedAndIsAudited() async throws {
        let email = "reject-ana@example.com"
        try await withMailDaemon { daemon, smtp in
            try await daemon.createUser(email, password: Fixture.password)
            #expect(try await daemon.emailInitiate(email).status == 200)
            let failed = try await daemon.waitForAudit(.mailFailed)
            #expect(failed.count == 1)
            #expect(failed.first?.detail?.contains("550") == true)
            // Given time for retries that must not come.
            try await Task.sleep(for: .seconds(3))
            #expect(try smtp.mails().isEmpty)
            #expect(try await daemon.server.store.auditEvents(since: nil, email: nil, kind: .mailRetried, limit: 10).isEmpty)
            let attempts = try DatabaseQueue(path: daemon.server.configuration.databasePath).read { db in
                try Row.fetchAll(db, sql: "SELECT state, attempts, payload FROM outbox")
            }
            #expect(attempts.count == 1)
            #expect(attempts.first?["state"] == "failed")
            #expect(attempts.first?["attempts"] == 1)
            #expect((attempts.first?["payload"] as Data?) == nil, "an ended item keeps no payload")
            let health = try await daemon.call(.GET, "/healthz")
            #expect(health["mail"] == "degraded")
            let metrics = try await daemon.metricsText()
            #expect(metrics.contains(#"countersign_outbox_total{kind="mail",outcome="failed"} 1"#))
        }
    }

    @Test func theResetPageSetsThePasswordOnceAndCarriesTheSecurityHeaders() async throws {
        try await withMailDaemon { daemon, smtp in
            try await daemon.createUser(Fixture.email, password: Fixture.password)
            #expect(try await daemon.emailInitiate(Fixture.email).status == 200)
            let mail = try #require(try await smtp.waitForMails(1).first)
            let token = try #require(mail.token)

            let form = try await daemon.resetPage(token: token)
            let mismatch = try await daemon.submitResetPage(token: token, password: Fixture.newPassword, confirm: "something else")
            let weak = try await daemon.submitResetPage(token: token, password: "short", confirm: "short")
            let done = try await daemon.submitResetPage(token: token, password: Fixture.newPassword, confirm: Fixture.newPassword)
            let again = try await daemon.resetPage(token: token)
            let postAgain = try await daemon.submitResetPage(token: token, password: "yet another one", confirm: "yet another one")

            #expect(form.status == 200)
            #expect(mismatch.status == 400)
            #expect(mismatch.text.contains("The two passwords do not match."))
            #expect(weak.status == 400)
            #expect(weak.text.contains("at least 8 characters"))
            #expect(done.status == 200)
            #expect(done.text.contains("Your password was changed"))
            #expect(again.status == 410)
            #expect(again.text.contains("expired or was already used"))
            #expect(postAgain.status == 410)
            for answer in [form, mismatch, weak, done, again, postAgain] {
                #expect(answer.headers["Content-Type"].first == "text/html; charset=utf-8")
                #expect(
                    answer.headers["Content-Security-Policy"].first
                        == "default-src 'none'; style-src 'self' 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'")
                #expect(answer.headers["Referrer-Policy"].first == "no-referrer")
                #expect(answer.headers["Cache-Control"].first == "no-store")
                #expect(answer.headers["X-Content-Type-Options"].first == "nosniff")
                #expect(!answer.text.contains("<script"))
            }
            #expect(try await daemon.canLogIn(Fixture.email, password: Fixture.newPassword))
            // Using the link used the code up too.
            #expect(try await daemon.emailVerify(Fixture.email, code: try #require(mail.code), newPassword: "other new password").status == 400)
            let changed = try await daemon.waitForAudit(.passwordChanged)
            #expect(changed.map(\.detail) == ["email link"])
        }
    }

    @Test func theResetPageAnswersALimitAsAPageWithItsHeaders() async throws {
        try await withMailDaemon(configure: { $0.rateLimits[.emailVerifyFailuresPerIP] = RateLimit(count: 1, window: 3600) }) { daemon, smtp in
            try await daemon.createUser(Fixture.email, password: Fixture.password)
            #expect(try await daemon.emailInitiate(Fixture.email).status == 200)
            let mail = try #require(try await smtp.waitForMails(1).first)
            let wrong = mail.code == "000000" ? "000001" : "000000"
            #expect(try await daemon.emailVerify(Fixture.email, code: wrong, newPassword: Fixture.newPassword).status == 400)

            let limited = try await daemon.submitResetPage(
                token: try #require(mail.token), password: Fixture.newPassword, confirm: Fixture.newPassword)

            #expect(limited.status == 429)
            #expect(limited.headers["Content-Type"].first == "text/html; charset=utf-8")
            #expect(Int(try #require(limited.headers["Retry-After"].first)) ?? 0 > 0)
            #expect(limited.headers["Content-Security-Policy"].first?.hasPrefix("default-src 'none'") == true)
            #expect(limited.text.contains("Too many reset attempts"))
        }
    }

    @Test func anAppThatOpenedTheDeepLinkVerifiesWithTheToken() async throws {
        try await withMailDaemon(configure: { $0.email.linkTemplate = ResetLinkTemplate("photosync://reset-password?token={token}&email={email}") }) {
            daemon, smtp in
            try await daemon.createUser("ana+photos@example.com", password: Fixture.password)
            #expect(try await daemon.emailInitiate("ana+photos@example.com").status == 200)
            let mail = try #require(try await smtp.waitForMails(1).first)
            let token = try #require(mail.token)
            // Every parameter the app checks is in the link, percent-encoded.
            #expect(mail.text?.contains("photosync://reset-password?token=\(token)&email=ana%2Bphotos%40example.com") == true)
            #expect(try await daemon.verifyLink(token: token, newPassword: "short").json["error"] as? String == "weak_password")
            #expect(try await daemon.verifyLink(token: token, newPassword: Fixture.newPassword).status == 200)
            let reused = try await daemon.verifyLink(token: token, newPassword: Fixture.newPassword)
            #expect(reused.status == 400)
            #expect(reused["error"] == "invalid_code")
            #expect(try await daemon.canLogIn("ana+photos@example.com", password: Fixture.newPassword))
        }
    }

    @Test func unknownAddressesCountAgainstThePerEmailLimitLikeKnownOnes() async throws {
        try await withMailDaemon(configure: { $0.rateLimits[.emailVerifyFailuresPerIP] = RateLimit(count: 2, window: 3600) }) { daemon, _ in
            try await daemon.createUser(Fixture.email, password: Fixture.password)
            var known: [Int] = []
            var unknown: [Int] = []
            for _ in 0..<4 {
                known.append(try await daemon.emailInitiate(Fixture.email).status)
                unknown.append(try await daemon.emailInitiate("nobody@example.com").status)
            }
            #expect(known == [200, 200, 200, 429])
            #expect(unknown == known)
            let limited = try await daemon.emailInitiate("nobody@example.com")
            #expect(Int(try #require(limited.headers["Retry-After"].first)) == limited.json["retryAfter"] as? Int)

            // Wrong codes are limited per client address.
            var verifies: [Int] = []
            for _ in 0..<3 {
                verifies.append(try await daemon.emailVerify("nobody@example.com", code: "123456", newPassword: Fixture.newPassword).status)
            }
            #expect(verifies == [400, 400, 429])
        }
    }

    @Test func withoutSMTPInitiateAnswersTheSameAndQueuesNothing() async throws {
        try await withTestDaemon { daemon in
            try await daemon.createUser(Fixture.email, password: Fixture.password)
            let answer = try await daemon.emailInitiate(Fixture.email)
            #expect(answer.status == 200)
            #expect(answer["message"] == "If an account exists for this address, a reset code is on its way.")
            let queued = try await DatabaseQueue(path: daemon.server.configuration.databasePath).read { db in
                try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM outbox")
            }
            #expect(queued == 0)
            #expect(try await daemon.call(.GET, "/healthz")["mail"] == "disabled")
        }
    }

    @Test func noCodeOrTokenReachesALogLineTheAuditTrailAMetricOrTheDatabaseInClear() async throws {
        let logs = LogCapture()
        try await withMailDaemon(logs: logs) { daemon, smtp in
            try await daemon.createUser(Fixture.email, password: Fixture.password)
            // The second code only once the first mail has left: a new code drops a mail still unsent.
            #expect(try await daemon.emailInitiate(Fixture.email).status == 200)
            _ = try await smtp.waitForMails(1)
            #expect(try await daemon.emailInitiate(Fixture.email).status == 200)
            let mails = try await smtp.waitForMails(2)
            #expect(mails.count == 2)
            let first = try #require(mails.first)
            let second = try #require(mails.last)
            // The first pair is refused, the second used through the page.
            #expect(try await daemon.emailVerify(Fixture.email, code: try #require(first.code), newPassword: Fixture.newPassword).status == 400)
            #expect(try await daemon.resetPage(token: try #require(second.token)).status == 200)
            let token = try #require(second.token)
            #expect(try await daemon.submitResetPage(token: token, password: Fixture.newPassword, confirm: Fixture.newPassword).status == 200)
            _ = try await daemon.waitForAudit(.passwordChanged)
            let metrics = try await daemon.metricsText()

            let secrets = try [first.code, first.token, second.code, second.token].map { try #require($0) }
            let audit = try await daemon.server.store.auditEvents(since: nil, email: nil, kind: nil, limit: 500)
            let auditText = audit.map { "\($0)" }.joined(separator: "\n")
            #expect(audit.contains { $0.kind == .mailQueued })
            var database = Data()
            for suffix in ["", "-wal"] {
                database.append(FileManager.default.contents(atPath: daemon.server.configuration.databasePath + suffix) ?? Data())
            }
            #expect(!database.isEmpty)
            for secret in secrets {
                #expect(!logs.text.contains(secret), "a log line holds a secret")
                #expect(!auditText.contains(secret), "the audit trail holds a secret")
                #expect(!metrics.contains(secret), "a metric holds a secret")
                #expect(database.range(of: Data(secret.utf8)) == nil, "the database holds a secret in clear")
            }
            #expect(!logs.text.contains("token="))

            // Stored as hashes keyed by the daemon's secret (email-reset.md), not plain digests:
            // the ticket is found by the keyed hash of its link, and its code hash is the keyed one.
            let configuration = daemon.server.configuration
            let keys = try SecretKeyFile.load(
                path: configuration.email.secretKeyPath(databasePath: configuration.databasePath, environment: [:]), create: false,
                logger: Logger(label: "test"))
            let secondCode = try #require(second.code)
            let ticket = try #require(try await daemon.server.store.emailReset(tokenHash: keys.hash(token, context: "link")))
            #expect(ticket.codeHash == keys.hash(secondCode, context: ticket.id))
            #expect(ticket.codeHash != SecureToken.sha256Hex(secondCode))
            #expect(ticket.codeHash != SecretKeys.random().hash(secondCode, context: ticket.id))
            #expect(try await daemon.server.store.emailReset(tokenHash: SecureToken.sha256Hex(token)) == nil)
            // A link's token is 256 random bits, base64url.
            #expect(token.count >= 43 && SecureToken.isWellFormed(token))
        }
    }

    @Test func theResetPagesRenderForEveryCase() {
        let form = ResetPages.form(email: "ana@example.com", token: "tok<en>", problem: "Bad & wrong")
        #expect(form.contains("a***@example.com"))
        #expect(form.contains("tok&lt;en&gt;"), "values are HTML-escaped")
        #expect(form.contains("Bad &amp; wrong"))
    }
}

/// trust.md, "One recovery at a time": whichever recovery sets the password
/// first ends the other.
@Suite struct OneRecoveryAtATimeTests {
    /// trust.md: a wrong link token counts against `emailVerifyFailuresPerIP` as a wrong code does.
    @Test func wrongLinkTokensCountAgainstTheVerifyLimit() async throws {
        try await withMailDaemon(configure: { $0.rateLimits[.emailVerifyFailuresPerIP] = RateLimit(count: 2, window: 3600) }, clock: ManualClock()) {
            daemon, _ in
            #expect(try await daemon.resetPage(token: "wrong-one").status == 410)
            #expect(try await daemon.resetPage(token: "wrong-two").status == 410)
            let limited = try await daemon.resetPage(token: "wrong-three")
            #expect(limited.status == 429)
            #expect(limited.headers.first(name: "Retry-After") != nil)
            // The page's form counts too, and so does the JSON route: the same budget.
            #expect(try await daemon.verifyLink(token: "wrong-four", newPassword: Fixture.newPassword).status == 429)
        }
    }

    /// By the mailed code, the link's API or the link's page: each sets the password the same way.
    @Test(arguments: ["code", "link", "page"])
    func anEmailResetCancelsAnApprovedAndAPendingPhoneReset(by way: String) async throws {
        try await withMailDaemon { daemon, smtp in
            try await daemon.createUser(Fixture.email, password: Fixture.password)
            let (phone, _) = try await daemon.login(Fixture.email, password: Fixture.password)
            // An approved phone reset, waiting to be completed with "phone password one".
            let (approvedID, approvedCode) = try await daemon.initiate(Fixture.email, newPassword: "phone password one")
            #expect(try await daemon.respond(approvedID, apiKey: phone, code: approvedCode).status == 200)
            // Then a pending one (a newer request for the user replaces none of the approved: it is not pending).
            let (pendingID, _) = try await daemon.initiate(Fixture.email, newPassword: "phone password two")
            async let poll = daemon.status(pendingID, wait: 30, timeout: .seconds(25))
            try await daemon.waitForLongPolls(1)

            // act: the email reset sets the password.
            #expect(try await daemon.emailInitiate(Fixture.email).status == 200)
            let mail = try #require(try await smtp.waitForMails(1).first)
            let verified =
                switch way {
                case "code": try await daemon.emailVerify(Fixture.email, code: try #require(mail.code), newPassword: Fixture.newPassword)
                case "link": try await daemon.verifyLink(token: try #require(mail.token), newPassword: Fixture.newPassword)
                default:
                    try await daemon.submitResetPage(token: try #require(mail.token), password: Fixture.newPassword, confirm: Fixture.newPassword)
                }
            #expect(verified.status == 200)

            // check: the waiting poll hears `cancelled` at once, completing the approved one is 409 `cancelled`,
            // and the password is the email reset's.
            #expect(try await poll["status"] == "cancelled")
            let completed = try await daemon.complete(approvedID)
            #expect(completed.status == 409)
            #expect(completed["status"] == "cancelled")
            #expect(try await daemon.status(approvedID)["status"] == "cancelled")
            #expect(try await daemon.canLogIn(Fixture.email, password: Fixture.newPassword))
            #expect(try await daemon.canLogIn(Fixture.email, password: "phone password one") == false)
            // The user's devices stay signed in.
            #expect(try await daemon.call(.GET, "/api/mobile/approvals/pending", apiKey: phone).status == 200)
            let trail = try await daemon.waitForAudit(.cancelled) { $0.count >= 2 }
            #expect(trail.filter { $0.detail == "password changed by email reset" }.count == 2)
        }
    }

    /// The reset mail names the devices that stay signed in, and how to sign one out.
    @Test func theResetMailNamesTheSignedInDevices() async throws {
        try await withMailDaemon { daemon, smtp in
            try await daemon.createUser(Fixture.email, password: Fixture.password)
            _ = try await daemon.login(Fixture.email, password: Fixture.password, device: "Ana's phone")
            _ = try await daemon.login(Fixture.email, password: Fixture.password, device: "Tablet <b>9</b>")
            #expect(try await daemon.emailInitiate(Fixture.email).status == 200)
            let mail = try #require(try await smtp.waitForMails(1).first)
            let text = try #require(mail.text)
            let html = try #require(mail.html)
            #expect(text.contains("  - Ana's phone") && text.contains("  - Tablet <b>9</b>"), "\(text)")
            #expect(text.contains("countersign device revoke") && text.contains("DELETE /api/mobile/device"))
            // In HTML a name is text, never markup.
            #expect(html.contains("Tablet &lt;b&gt;9&lt;/b&gt;") && !html.contains("<b>9</b>"), "\(html)")
        }
    }

    @Test func aCompletedPhoneResetVoidsTheUnusedEmailCodeAndLink() async throws {
        try await withMailDaemon { daemon, smtp in
            try await daemon.createUser(Fixture.email, password: Fixture.password)
            let (phone, _) = try await daemon.login(Fixture.email, password: Fixture.password)
            #expect(try await daemon.emailInitiate(Fixture.email).status == 200)
            let mail = try #require(try await smtp.waitForMails(1).first)

            let (id, code) = try await daemon.initiate(Fixture.email, newPassword: "phone password one")
            #expect(try await daemon.respond(id, apiKey: phone, code: code).status == 200)
            #expect(try await daemon.complete(id).status == 200)

            #expect(try await daemon.emailVerify(Fixture.email, code: try #require(mail.code), newPassword: Fixture.newPassword).status == 400)
            #expect(try await daemon.verifyLink(token: try #require(mail.token), newPassword: Fixture.newPassword).status == 400)
            #expect(try await daemon.canLogIn(Fixture.email, password: "phone password one"))
            // The device that approved stays signed in.
            #expect(try await daemon.call(.GET, "/api/mobile/approvals/pending", apiKey: phone).status == 200)
        }
    }
}

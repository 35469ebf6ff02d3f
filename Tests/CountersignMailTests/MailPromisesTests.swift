import CountersignCore
import CountersignMail
import CountersignRuntime
import Foundation
import MailTestSupport
import NIOHTTP1
import TestSupport
import Testing

@testable import DaemonTestSupport

/// Mail's promises that no other test checks: implicit TLS (`smtps://`), the
/// start-up line that says whether mail is on, the outbox's depth on
/// `/metrics`, and the audit of a password changed with an email code.
@Suite struct MailPromisesTests {
    /// `countersign_outbox_waiting{kind="KIND"}` as `/metrics` shows it.
    static func outboxWaiting(_ daemon: TestDaemon, kind: String) async throws -> Int? {
        let text = try await daemon.metricsText()
        let line = text.split(separator: "\n").first { $0.hasPrefix("countersign_outbox_waiting{kind=\"\(kind)\"}") }
        return line.flatMap { Double($0.split(separator: " ").last ?? "") }.map { Int($0) }
    }

    @Test func aResetMailGoesOutOverImplicitTLS() async throws {
        try await withMailDaemon(implicitTLS: true) { daemon, smtp in
            #expect(smtp.url.hasPrefix("smtps://"))
            try await daemon.createUser(Fixture.email, password: Fixture.password)
            #expect(try await daemon.emailInitiate(Fixture.email).status == 200)
            let mail = try #require(try await smtp.waitForMails(1).first)
            #expect(mail.tls && mail.authenticated)
            #expect(mail.rcptTo == [Fixture.email])
            let code = try #require(mail.code)
            #expect(try await daemon.emailVerify(Fixture.email, code: code, newPassword: Fixture.newPassword).status == 200)
            #expect(try await daemon.call(.GET, "/healthz")["mail"] == "ok")
        }
    }

    @Test func theStartUpSaysWhetherMailIsOn() async throws {
        let off = LogCapture()
        try await withTestDaemon(logs: off) { _ in }
        #expect(off.text.contains("notice mail is off (no --smtp-url): email resets answer as usual, but no mail is queued or sent"))
        #expect(!off.text.contains("mail on"))

        let on = LogCapture()
        try await withMailDaemon(logs: on) { _, smtp in
            #expect(on.text.contains("info mail on"))
            #expect(on.text.contains("127.0.0.1:\(smtp.port)"))
            #expect(!on.text.contains("mail is off"))
            #expect(!on.text.contains(SMTPTestServer.password))
        }
    }

    @Test func theOutboxDepthCountsMailNotYetSent() async throws {
        // An SMTP server that never answers (nothing listens on port 1): the mail waits.
        try await withTestDaemon(configure: {
            $0.email.smtp = try? SMTPConfiguration(url: "smtp://127.0.0.1:1", from: MailFixture.from)
        }) { daemon in
            #expect(try await Self.outboxWaiting(daemon, kind: "mail") == 0)
            try await daemon.createUser(Fixture.email, password: Fixture.password)
            #expect(try await daemon.emailInitiate(Fixture.email).status == 200)
            #expect(try await Self.outboxWaiting(daemon, kind: "mail") == 1)
            #expect(try await Self.outboxWaiting(daemon, kind: "webhook") == 0)
        }
        // A server that answers: the depth goes back to zero once the mail is sent.
        try await withMailDaemon { daemon, smtp in
            try await daemon.createUser(Fixture.email, password: Fixture.password)
            #expect(try await daemon.emailInitiate(Fixture.email).status == 200)
            #expect(try await smtp.waitForMails(1).count == 1)
            var waiting = try await Self.outboxWaiting(daemon, kind: "mail")
            let polling = ContinuousClock.now
            while waiting != 0 && ContinuousClock.now - polling < .seconds(60) {
                try await Task.sleep(for: .milliseconds(50))
                waiting = try await Self.outboxWaiting(daemon, kind: "mail")
            }
            #expect(waiting == 0)
        }
    }

    @Test func aPasswordChangedWithAnEmailCodeIsAuditedAsSuch() async throws {
        try await withMailDaemon { daemon, smtp in
            let user = try await daemon.createUser(Fixture.email, password: Fixture.password)
            #expect(try await daemon.emailInitiate(Fixture.email).status == 200)
            let code = try #require(try await smtp.waitForMails(1).first?.code)
            #expect(try await daemon.emailVerify(Fixture.email, code: code, newPassword: Fixture.newPassword).status == 200)
            let changed = try await daemon.waitForAudit(.passwordChanged)
            #expect(changed.count == 1)
            #expect(changed.first?.detail == "email code")
            #expect(changed.first?.userID == user.id)
            #expect(try await daemon.canLogIn(Fixture.email, password: Fixture.newPassword))
        }
    }
}

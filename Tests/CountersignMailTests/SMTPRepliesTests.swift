import CountersignCore
import CountersignMail
import Foundation
import Logging
import MailTestSupport
import TestSupport
import Testing

/// email-reset.md: temporary failures are retried, permanent ones (5xx) are not.
@Suite struct SMTPRepliesTests {
    @Test func aRefusedLoginIsAPermanentFailureAndTheRightOneDelivers() async throws {
        try await withTemporaryFolder { folder in
            try await withSMTPTestServer(folder: folder.url) { smtp in
                let message = MailMessage(to: "ana@example.com", subject: "Your code", text: "123456", html: "<p>123456</p>")
                for (password, accepted) in [("not the password", false), (SMTPTestServer.password, true)] {
                    let mailer = SMTPMailer(
                        configuration: try SMTPConfiguration(
                            url: smtp.url, user: SMTPTestServer.user, password: password, from: MailFixture.from, caFile: smtp.caFile))
                    let delivery = await mailer.send(message, logger: Logger(label: "smtp-test"))
                    try await mailer.shutdown()
                    switch delivery {
                    case .accepted: #expect(accepted)
                    case .permanentFailure(let reason): #expect(!accepted && reason.contains("535"), "\(reason)")
                    case .temporaryFailure(let reason): Issue.record("a temporary failure: \(reason)")
                    }
                }
            }
        }
    }
}

import CountersignCore
import CountersignMail
import CountersignRuntime
import Foundation
import MailTestSupport
import NIOHTTP1
import TestSupport

/// Runs `body` against a test daemon whose mail goes to a real SMTP server on
/// 127.0.0.1 (STARTTLS and AUTH required), both on a fresh temporary folder.
func withMailDaemon<T: Sendable>(
    configure: (inout ServeConfiguration) -> Void = { _ in },
    logs: LogCapture = LogCapture(),
    clock: ManualClock? = nil,
    implicitTLS: Bool = false,
    _ body: @Sendable (TestDaemon, SMTPTestServer) async throws -> T
) async throws -> T {
    try await withTemporaryFolder { folder in
        try await withSMTPTestServer(folder: folder.url, implicitTLS: implicitTLS) { smtp in
            var configuration = TestDaemon.configuration(folder, configure)
            configuration.email.smtp = try SMTPConfiguration(
                url: smtp.url, user: SMTPTestServer.user, password: SMTPTestServer.password, from: MailFixture.from, caFile: smtp.caFile)
            configuration.email.publicURL = configuration.email.publicURL ?? "https://auth.example.test"
            return try await TestDaemon.run(configuration, logs: logs, clock: clock) { daemon in try await body(daemon, smtp) }
        }
    }
}

extension TestDaemon {
    func emailInitiate(_ email: String) async throws -> Answer {
        try await call(.POST, "/api/mobile/auth/reset/email/initiate", json: ["email": email])
    }

    func emailVerify(_ email: String, code: String, newPassword: String) async throws -> Answer {
        try await call(.POST, "/api/mobile/auth/reset/email/verify", json: ["email": email, "code": code, "newPassword": newPassword])
    }

    func verifyLink(token: String, newPassword: String) async throws -> Answer {
        try await call(.POST, "/api/mobile/auth/reset/email/verify-link", json: ["token": token, "newPassword": newPassword])
    }

    func resetPage(token: String) async throws -> Answer {
        try await call(.GET, "/reset-password?token=\(token)")
    }

    func submitResetPage(token: String, password: String, confirm: String) async throws -> Answer {
        func encode(_ value: String) -> String { value.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "" }
        let form = "token=\(encode(token))&password=\(encode(password))&confirm=\(encode(confirm))"
        return try await call(.POST, "/reset-password", rawBody: Array(form.utf8), contentType: "application/x-www-form-urlencoded")
    }

    /// Whether `password` signs `email` in.
    func canLogIn(_ email: String, password: String) async throws -> Bool {
        let answer = try await call(
            .POST, "/api/mobile/auth/login", json: ["email": email, "password": password, "deviceName": "Laptop", "platform": "web"])
        return answer.status == 200
    }

    /// Waits until the audit trail's events of `kind` satisfy `done` (by default: there is one);
    /// the writer stores them in batches, after the answers.
    func waitForAudit(
        _ kind: AuditKind, timeout: Duration = .seconds(60), until done: ([AuditEvent]) -> Bool = { !$0.isEmpty }
    ) async throws -> [AuditEvent] {
        let clock = ContinuousClock()
        let start = clock.now
        while true {
            let events = try await server.store.auditEvents(since: nil, email: nil, kind: kind, limit: 100)
            if done(events) || clock.now - start > timeout { return events }
            try await Task.sleep(for: .milliseconds(50))
        }
    }
}

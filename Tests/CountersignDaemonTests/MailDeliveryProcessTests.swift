import Foundation
import MailTestSupport
import NIOHTTP1
import TestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Mail with the real binary: the outbox across `kill -9`, `mail test`, and
/// the refusal of plain-text SMTP to a remote host at start.
@Suite struct MailDeliveryProcessTests {
    static let email = "ana@example.com"

    static func withFolder<T>(_ body: (URL) async throws -> T) async throws -> T {
        try await withTemporaryDirectory("countersign-mail", body)
    }

    /// The `--smtp-*` flags for `server`, its password in a file in `folder`.
    static func smtpFlags(port: Int, caFile: String, folder: URL) throws -> [String] {
        let passwordFile = folder.appendingPathComponent("smtp-password")
        try Data("\(SMTPTestServer.password)\n".utf8).write(to: passwordFile)
        return [
            "--smtp-url", "smtp://127.0.0.1:\(port)", "--smtp-user", SMTPTestServer.user, "--smtp-password-file", passwordFile.path,
            "--smtp-from", "Countersign <noreply@countersign.test>", "--smtp-ca-file", caFile,
        ]
    }

    static func startDaemon(_ arguments: [String], log: URL) async throws -> RunningDaemon {
        try await RunningDaemon.start(arguments, log: log)
    }

    @Test func aMailAcceptedBeforeTheAnswerIsDeliveredAfterKillDashNine() async throws {
        try await Self.withFolder { folder in
            // setup: a user, and an SMTP port where nothing answers yet.
            let database = folder.appendingPathComponent("countersign.sqlite").path
            let added = try await DeviceSimulateTests.run(
                ["user", "add", Self.email, "--database", database, "--bcrypt-cost", "4"], input: "correct horse\n")
            #expect(added.status == 0, "\(added.output)")
            let silentPort = unusedPort()
            let log = folder.appendingPathComponent("daemon.log")
            let common = ["--database", database, "--public-url", "https://auth.example.test"]
            let first = try await Self.startDaemon(
                common + Self.smtpFlags(port: silentPort, caFile: "/dev/null", folder: folder), log: log)
            defer { first.stop() }

            // act: the 200, then kill -9 before any delivery could happen.
            let (status, _) = try await DaemonProcessTests.http(
                .POST, "\(first.base)/api/mobile/auth/reset/email/initiate", json: #"{"email":"\#(Self.email)"}"#)
            kill(first.processIdentifier, SIGKILL)
            try await first.exited()
            #expect(status == 200)

            // check: restarted with a reachable server, the daemon delivers it.
            try await withSMTPTestServer(folder: folder) { smtp in
                let second = try await Self.startDaemon(
                    common + Self.smtpFlags(port: smtp.port, caFile: smtp.caFile, folder: folder), log: log)
                defer { second.stop() }
                let mails = try await smtp.waitForMails(1)
                #expect(mails.count == 1, "\((try? String(contentsOf: log, encoding: .utf8)) ?? "")")
                let code = try #require(mails.first?.code)
                let (verified, _) = try await DaemonProcessTests.http(
                    .POST, "\(second.base)/api/mobile/auth/reset/email/verify",
                    json: #"{"email":"\#(Self.email)","code":"\#(code)","newPassword":"staple orbit lantern"}"#)
                #expect(verified == 200)
            }
        }
    }

    @Test func mailTestSendsOneMailAndPrintsTheServersAnswer() async throws {
        try await Self.withFolder { folder in
            try await withSMTPTestServer(folder: folder) { smtp in
                let (status, output) = try await FCMCheckCommandTests.run(
                    ["mail", "test", "--to", Self.email] + Self.smtpFlags(port: smtp.port, caFile: smtp.caFile, folder: folder))
                #expect(status == 0, "\(output)")
                #expect(output.contains("accepted: 250"))
                #expect(!output.contains(SMTPTestServer.password))
                let mails = try await smtp.waitForMails(1)
                #expect(mails.count == 1)
                #expect(mails.first?.rcptTo == [Self.email])
                #expect(mails.first?.subject == "Countersign test mail")

                let (refused, said) = try await FCMCheckCommandTests.run(
                    ["mail", "test", "--to", "reject-me@example.com"] + Self.smtpFlags(port: smtp.port, caFile: smtp.caFile, folder: folder))
                #expect(refused != 0)
                #expect(said.contains("550"))
            }
        }
    }

    @Test func plainTextSMTPToARemoteHostIsRefusedAtStart() async throws {
        try await Self.withFolder { folder in
            let (status, output) = try await FCMCheckCommandTests.run([
                "serve", "--database", folder.appendingPathComponent("c.sqlite").path, "--listen", "127.0.0.1:0",
                "--smtp-url", "smtp://mail.example.com:25", "--smtp-tls", "none", "--smtp-from", "noreply@example.com",
            ])
            #expect(status == 78)
            #expect(output.contains("plain-text SMTP (--smtp-tls none) is refused to mail.example.com"))
        }
    }
}

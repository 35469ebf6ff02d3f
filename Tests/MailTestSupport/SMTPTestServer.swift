import Foundation
import TestSupport

#if canImport(Glibc)
import Glibc
#endif

/// A real SMTP server on 127.0.0.1 (aiosmtpd, `scripts/smtp-test-server.py`)
/// with STARTTLS and AUTH required, for the mail tests. Recipients named
/// `tempfail…` get a 451 once, `reject…` a 550 always.
public final class SMTPTestServer: @unchecked Sendable {
    public static let user = "countersign"
    public static let password = "smtp-test-password-8ac1"

    public let port: Int
    /// TLS from the first byte (`smtps://`) instead of STARTTLS.
    public let implicitTLS: Bool
    /// The server's self-signed certificate: what the client must trust.
    public let caFile: String
    /// Where accepted mails land.
    public let mailFolder: URL
    private let process: TiedProcess

    /// One mail as the server received it.
    public struct Mail: Decodable, Sendable {
        public var mailFrom: String
        public var rcptTo: [String]
        public var tls: Bool
        public var authenticated: Bool
        public var from: String
        public var to: String
        public var subject: String
        public var contentType: String
        public var text: String?
        public var html: String?
        public var raw: String
    }

    /// The repository's `scripts/smtp-test-server.py`.
    static var script: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("scripts/smtp-test-server.py").path
    }

    /// Starts a server whose files live in `folder`; waits until it listens.
    public init(folder: URL, port: Int? = nil, implicitTLS: Bool = false) async throws {
        self.implicitTLS = implicitTLS
        mailFolder = folder.appendingPathComponent("smtp-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: mailFolder, withIntermediateDirectories: true)
        let passwordFile = mailFolder.appendingPathComponent("password").path
        try Data(Self.password.utf8).write(to: URL(fileURLWithPath: passwordFile))
        let log = mailFolder.appendingPathComponent("server.log")
        _ = FileManager.default.createFile(atPath: log.path, contents: nil)
        let logHandle = try FileHandle(forWritingTo: log)
        defer { try? logHandle.close() }
        // posix_spawn through TiedProcess, like every other program the tests start:
        // Foundation's `Process.run()` crashed the test process now and then (a copy
        // on a bad pointer inside it), and this server was its last user.
        process = try TiedProcess(
            URL(fileURLWithPath: try await TestPython.path()),
            [Self.script, "--dir", mailFolder.path, "--user", Self.user, "--password-file", passwordFile]
                + (port.map { ["--port", String($0)] } ?? []) + (implicitTLS ? ["--implicit-tls"] : []),
            output: logHandle)
        let ready = mailFolder.appendingPathComponent("ready.json")
        try await waitForReadyFile(
            ready, of: process, log: log, failure: "the SMTP test server did not start (see its log)")
        struct Ready: Decodable {
            var port: Int
            var ca: String
        }
        let info = try JSONDecoder().decode(Ready.self, from: Data(contentsOf: ready))
        self.port = info.port
        self.caFile = info.ca
    }

    public var url: String { "\(implicitTLS ? "smtps" : "smtp")://127.0.0.1:\(port)" }

    /// The mails received so far, oldest first.
    public func mails() throws -> [Mail] {
        let names = try FileManager.default.contentsOfDirectory(atPath: mailFolder.path).filter { $0.hasSuffix(".json") && $0 != "ready.json" }
        return try names.sorted().map { try JSONDecoder().decode(Mail.self, from: Data(contentsOf: mailFolder.appendingPathComponent($0))) }
    }

    /// Waits until at least `count` mails have arrived (or `timeout` passed); returns them all.
    public func waitForMails(_ count: Int, timeout: Duration = .seconds(60)) async throws -> [Mail] {
        let clock = ContinuousClock()
        let start = clock.now
        while true {
            let mails = try mails()
            if mails.count >= count || clock.now - start > timeout { return mails }
            try await Task.sleep(for: .milliseconds(50))
        }
    }

    /// SIGKILL (a test server keeps nothing worth a graceful stop), then the
    /// short wait to reap it: a longer one would hold a thread every test shares.
    public func stop() {
        process.stop()
    }

    deinit { stop() }
}

/// Runs `body` with an SMTP test server, stopped afterwards whatever happens.
public func withSMTPTestServer<T>(folder: URL, implicitTLS: Bool = false, _ body: (SMTPTestServer) async throws -> T) async throws -> T {
    let server = try await SMTPTestServer(folder: folder, implicitTLS: implicitTLS)
    defer { server.stop() }
    return try await body(server)
}

extension SMTPTestServer.Mail {
    /// The 6-digit code in the plain-text body.
    public var code: String? {
        guard let text, let range = text.range(of: #"\b[0-9]{6}\b"#, options: .regularExpression) else { return nil }
        return String(text[range])
    }

    /// The reset link's token (`token=…`) in the plain-text body.
    public var token: String? {
        guard let text, let range = text.range(of: #"token=[A-Za-z0-9_-]+"#, options: .regularExpression) else { return nil }
        return String(text[range].dropFirst("token=".count))
    }

    /// The first http(s) link in the plain-text body.
    public var link: String? {
        guard let text, let range = text.range(of: #"https?://[^\s]+"#, options: .regularExpression) else { return nil }
        return String(text[range])
    }
}

/// What the mail tests send with.
public enum MailFixture {
    /// The sender every test configures.
    public static let from = "Countersign <noreply@countersign.test>"
}

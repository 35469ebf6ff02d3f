import CountersignCore
import CountersignMail
import CountersignRuntime
import Foundation
import TestSupport
import Testing

/// The mail and device-key settings as a user gives them: flags, environment,
/// the config file (nested `smtp`), systemd credentials, template folders.
@Suite struct MailConfigurationTests {
    @Test func smtpConfigurationComesFromTheConfigFileTheEnvironmentAndTheCredential() async throws {
        try await withTemporaryFolder { folder in
            // setup: the password as systemd hands it over, a config file, an environment override.
            let credentials = folder.url.appendingPathComponent("credentials")
            try FileManager.default.createDirectory(at: credentials, withIntermediateDirectories: true)
            try Data("relay-password\n".utf8).write(to: credentials.appendingPathComponent("smtp-password"))
            let config = folder.url.appendingPathComponent("countersign.json")
            try Data(
                #"{"smtp": {"url": "smtp://relay.example.com:587", "user": "apikey", "from": "Example <noreply@example.com>"}, "publicURL": "https://auth.example.com", "emailCodeTTL": 600, "deviceKeys": "required"}"#
                    .utf8
            ).write(to: config)

            // act
            let configuration = try ConfigurationLoader(
                flags: [:], environment: ["CREDENTIALS_DIRECTORY": credentials.path, "COUNTERSIGN_SMTP_USER": "override"],
                configFile: config.path
            ).serveConfiguration()

            // check
            let smtp = try #require(configuration.email.smtp)
            #expect(smtp.host == "relay.example.com")
            #expect(smtp.security == .startTLS)
            #expect(smtp.user == "override")
            #expect(smtp.password == "relay-password")
            #expect(smtp.from == "Example <noreply@example.com>")
            #expect(!"\(smtp)".contains("relay-password"), "settings never print their password")
            #expect(configuration.email.codeTTL == 600)
            #expect(configuration.deviceKeys == .required)
            let link = configuration.email.link(host: "127.0.0.1", port: 8080)
            #expect(link.template.link(token: "t0k", email: "a@b.c") == "https://auth.example.com/reset-password?token=t0k")
            #expect(!link.usesListenAddress)
        }
    }

    @Test func badMailAndKeySettingsStopStartUpWithOneLine() throws {
        let plain = ["--smtp-url": "smtp://mail.example.com:25", "--smtp-tls": "none", "--smtp-from": "noreply@example.com"]
        #expect(throws: ConfigurationError.self) { try ConfigurationLoader(flags: plain, environment: [:], configFile: nil).serveConfiguration() }
        var loopback = plain
        loopback["--smtp-url"] = "smtp://127.0.0.1:25"
        #expect(
            try ConfigurationLoader(flags: loopback, environment: [:], configFile: nil).serveConfiguration().email.smtp?.security
                == SMTPConfiguration.Security.none)
        #expect(throws: ConfigurationError.self) {
            try ConfigurationLoader(flags: ["--smtp-url": "smtp://relay.example.com:587"], environment: [:], configFile: nil).serveConfiguration()
        }
        #expect(throws: ConfigurationError.self) {
            try ConfigurationLoader(flags: ["--smtp-url": "http://relay.example.com"], environment: [:], configFile: nil).serveConfiguration()
        }
        #expect(throws: ConfigurationError.self) {
            try ConfigurationLoader(flags: ["--reset-link-template": "https://x.example/reset"], environment: [:], configFile: nil)
                .serveConfiguration()
        }
        #expect(throws: ConfigurationError("invalid value \"sometimes\" for COUNTERSIGN_DEVICE_KEYS: expected off, optional or required")) {
            try ConfigurationLoader(flags: [:], environment: ["COUNTERSIGN_DEVICE_KEYS": "sometimes"], configFile: nil).serveConfiguration()
        }
        #expect(throws: ConfigurationError.self) {
            try ConfigurationLoader(flags: ["--email-code-ttl": "0"], environment: [:], configFile: nil).serveConfiguration()
        }
    }

    @Test func aTemplatesFolderReplacesTheBuiltInMail() async throws {
        try await withTemporaryFolder { folder in
            try Data("Code {{code}} for {{email}}, {{validFor}}: {{link}}".utf8)
                .write(to: folder.url.appendingPathComponent("reset.txt.mustache"))
            let templates = try MailTemplates(directory: folder.url.path)
            let (text, html) = templates.render(.init(email: "a&b@example.com", code: "123456", link: "https://x/?t=1&e=2", validFor: "15 minutes"))
            #expect(text == "Code 123456 for a&b@example.com, 15 minutes: https://x/?t=1&e=2", "plain text is not HTML-escaped")
            #expect(html.contains("a&amp;b@example.com"), "the HTML body, still built in, escapes")
            #expect(throws: MailTemplateError.self) { try MailTemplates(directory: folder.url.appendingPathComponent("missing").path) }
        }
    }

    @Test func theSecretKeyIsCreatedOnceAndAShortKeyIsRefused() async throws {
        try await withTemporaryFolder { folder in
            let path = folder.url.appendingPathComponent("countersign.key").path
            let logger = LogCapture().logger()
            let first = try SecretKeyFile.load(path: path, create: true, logger: logger)
            let again = try SecretKeyFile.load(path: path, create: true, logger: logger)
            #expect(first.hash("123456", context: "t") == again.hash("123456", context: "t"), "the same key after a restart")
            let attributes = try FileManager.default.attributesOfItem(atPath: path)
            #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600)
            let short = folder.url.appendingPathComponent("short.key").path
            try Data(repeating: 1, count: 16).write(to: URL(fileURLWithPath: short))
            #expect(throws: ConfigurationError.self) { try SecretKeyFile.load(path: short, create: false, logger: logger) }
            #expect(throws: ConfigurationError.self) { try SecretKeyFile.load(path: path + ".absent", create: false, logger: logger) }
        }
    }
}

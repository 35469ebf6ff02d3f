import ArgumentParser
import CountersignRuntime

/// The mail settings `serve` and `mail test` find the same way: flag,
/// environment, config file (the SMTP password also from `$CREDENTIALS_DIRECTORY/smtp-password`).
struct MailOptions: ParsableArguments {
    typealias Setting = ConfigurationLoader

    @Option(
        name: Setting.smtpURL.name,
        help: Setting.smtpURL.help(
            "The SMTP submission server, smtp://HOST:587 (STARTTLS) or smtps://HOST:465 (implicit TLS): turns mail on.", value: "url"))
    var smtpURL: String?
    @Option(name: Setting.smtpUser.name, help: Setting.smtpUser.help("The SMTP AUTH user.", value: "user")) var smtpUser: String?
    @Option(
        name: Setting.smtpPasswordFile.name,
        help: Setting.smtpPasswordFile.help("File holding the SMTP password.", default: "$CREDENTIALS_DIRECTORY/smtp-password", value: "file"))
    var smtpPasswordFile: String?
    @Option(name: Setting.smtpFrom.name, help: Setting.smtpFrom.help("The sender: \"Example <noreply@example.com>\", say.", value: "address"))
    var smtpFrom: String?
    @Option(
        name: Setting.smtpTLS.name,
        help: Setting.smtpTLS.help("TLS to the SMTP server; none only to a relay on a loopback address.", default: "required", value: "required|none")
    )
    var smtpTLS: String?
    @Option(
        name: Setting.smtpCAFile.name,
        help: Setting.smtpCAFile.help("A CA bundle (PEM) to trust for the SMTP server instead of the system's.", value: "file"))
    var smtpCAFile: String?

    var flags: [String: String] {
        [
            Setting.smtpURL.flag: smtpURL, Setting.smtpUser.flag: smtpUser, Setting.smtpPasswordFile.flag: smtpPasswordFile,
            Setting.smtpFrom.flag: smtpFrom, Setting.smtpTLS.flag: smtpTLS, Setting.smtpCAFile.flag: smtpCAFile,
        ].compactMapValues { $0 }
    }
}

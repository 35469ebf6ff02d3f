import ArgumentParser
import CountersignRuntime

/// The mail settings `serve` and `mail test` find the same way: flag,
/// environment, config file (the SMTP password also from `$CREDENTIALS_DIRECTORY/smtp-password`).
struct MailOptions: ParsableArguments {
    typealias Setting = ConfigurationLoader

    @Option(
        name: .customLong(Setting.smtpURL.longName),
        help: "SMTP submission server: smtp://HOST:587 (STARTTLS) or smtps://HOST:465 (implicit TLS). Unset: mail off.")
    var smtpURL: String?
    @Option(name: .customLong(Setting.smtpUser.longName), help: "SMTP AUTH user.") var smtpUser: String?
    @Option(
        name: .customLong(Setting.smtpPasswordFile.longName),
        help: "File holding the SMTP password (else $CREDENTIALS_DIRECTORY/smtp-password).")
    var smtpPasswordFile: String?
    @Option(name: .customLong(Setting.smtpFrom.longName), help: "Sender, e.g. \"Example <noreply@example.com>\".") var smtpFrom: String?
    @Option(
        name: .customLong(Setting.smtpTLS.longName),
        help: "required (default) or none; none only to a relay on a loopback address.")
    var smtpTLS: String?
    @Option(name: .customLong(Setting.smtpCAFile.longName), help: "A CA bundle (PEM) to trust for the SMTP server instead of the system's.")
    var smtpCAFile: String?

    var flags: [String: String] {
        [
            Setting.smtpURL.flag: smtpURL, Setting.smtpUser.flag: smtpUser, Setting.smtpPasswordFile.flag: smtpPasswordFile,
            Setting.smtpFrom.flag: smtpFrom, Setting.smtpTLS.flag: smtpTLS, Setting.smtpCAFile.flag: smtpCAFile,
        ].compactMapValues { $0 }
    }
}

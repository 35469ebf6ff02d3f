import CountersignCore
import Foundation

/// Where and how mail is submitted: an SMTP server reached with STARTTLS
/// (`smtp://host:587`) or implicit TLS (`smtps://host:465`), with AUTH when a
/// user is set. Plain text is possible only to a loopback host (a local relay).
public struct SMTPConfiguration: Sendable, Equatable, CustomStringConvertible, CustomReflectable {
    public enum Security: String, Sendable {
        /// `smtp://`: STARTTLS, refused if the server does not offer it.
        case startTLS
        /// `smtps://`: TLS from the first byte.
        case implicitTLS
        /// `smtp://` with `--smtp-tls none`: no TLS, for a loopback host only.
        case none
    }

    public var url: String
    public var host: String
    public var security: Security
    public var user: String?
    /// Read from a file or a systemd credential, never a flag value; never logged.
    public var password: String?
    /// `noreply@example.com` or `Example <noreply@example.com>`.
    public var from: String
    /// A CA bundle to trust instead of the system's (a private relay).
    public var caFile: String?
    /// Seconds for the whole submission of one mail.
    public var timeout: Int
    /// Mails submitted at once, each on a thread of its own.
    public var maxConcurrentSends: Int

    /// Checks the settings as a whole; throws a sentence naming the problem.
    ///
    /// - Parameter plainText: `--smtp-tls none`.
    public init(
        url: String, plainText: Bool = false, user: String? = nil, password: String? = nil, from: String, caFile: String? = nil,
        timeout: Int = 30, maxConcurrentSends: Int = 4
    ) throws(SMTPConfigurationError) {
        guard let parsed = URL(string: url), let scheme = parsed.scheme?.lowercased(), let host = parsed.host, !host.isEmpty,
            scheme == "smtp" || scheme == "smtps", parsed.path.isEmpty || parsed.path == "/", parsed.user == nil, parsed.query == nil
        else {
            throw SMTPConfigurationError(
                "the SMTP URL must be smtp://HOST:PORT (STARTTLS) or smtps://HOST:PORT (implicit TLS), without a user or path")
        }
        switch (scheme, plainText) {
        case ("smtps", true):
            throw SMTPConfigurationError("smtps:// is TLS from the first byte; --smtp-tls none contradicts it")
        case ("smtps", false): security = .implicitTLS
        case (_, false): security = .startTLS
        default:
            guard NetworkHost.isLoopback(host) else {
                throw SMTPConfigurationError(
                    "plain-text SMTP (--smtp-tls none) is refused to \(host): the password and the reset codes would cross the network in clear. Use STARTTLS (smtp://) or smtps://, or a relay on 127.0.0.1"
                )
            }
            security = .none
        }
        guard Self.mailbox(in: from) != nil else {
            throw SMTPConfigurationError(
                "the sender (--smtp-from) must be an address such as noreply@example.com or \"Example <noreply@example.com>\"")
        }
        if user != nil, password == nil {
            throw SMTPConfigurationError("an SMTP user needs a password: --smtp-password-file, or the systemd credential smtp-password")
        }
        self.url = url
        self.host = host
        self.user = user
        self.password = password
        self.from = from
        self.caFile = caFile
        self.timeout = timeout
        self.maxConcurrentSends = maxConcurrentSends
    }

    /// Never the password, whatever prints these settings.
    public var description: String { "SMTPConfiguration(\(summary))" }
    public var customMirror: Mirror { Mirror(self, children: ["summary": summary]) }

    /// What the start-up line may say: no password.
    public var summary: String {
        "\(url) (\(security.rawValue))" + (user.map { ", user \($0)" } ?? "") + ", from \(from)"
    }

    /// The bare address of `Name <address>` or `address`; `nil` unless it looks like one mailbox on one line.
    static func mailbox(in text: String) -> String? {
        guard !text.contains(where: { $0 == "\r" || $0 == "\n" }) else { return nil }
        var address = text.trimmingCharacters(in: .whitespaces)
        if let open = address.lastIndex(of: "<"), address.hasSuffix(">") {
            address = String(address[address.index(after: open)..<address.index(before: address.endIndex)])
        }
        let parts = address.split(separator: "@", omittingEmptySubsequences: false)
        guard parts.count == 2, !parts[0].isEmpty, parts[1].contains("."), !address.contains(where: { $0 == " " || $0 == "<" || $0 == ">" })
        else { return nil }
        return address
    }
}

public struct SMTPConfigurationError: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}

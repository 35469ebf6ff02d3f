import Logging

/// One mail to one address: both a plain-text and an HTML body.
public struct MailMessage: Sendable, Equatable {
    public var to: String
    public var subject: String
    public var text: String
    public var html: String

    public init(to: String, subject: String, text: String, html: String) {
        self.to = to
        self.subject = subject
        self.text = text
        self.html = html
    }
}

/// What the mail server said.
public enum MailDelivery: Sendable, Equatable {
    /// Accepted (2xx), with the server's last reply.
    case accepted(String)
    /// Try again later: a 4xx reply, or no answer at all.
    case temporaryFailure(String)
    /// Refused for good: a 5xx reply.
    case permanentFailure(String)
}

/// Sends mail (SMTP submission).
public protocol MailSender: Sendable {
    func send(_ message: MailMessage, logger: Logger) async -> MailDelivery
    /// How mail is doing, for `/healthz`.
    var health: MailHealth { get }
}

/// The `mail` field of `/healthz`.
public enum MailHealth: String, Sendable {
    /// Mail is configured and the last send went through (or none was tried yet).
    case ok
    /// No SMTP server is configured.
    case disabled
    /// The last send attempt failed.
    case degraded
}

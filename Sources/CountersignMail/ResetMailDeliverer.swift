import CountersignCore
import Foundation
import Logging

/// Delivers the outbox's reset mails: opens the sealed payload, renders the
/// templates with the link, and submits it. What the server says decides what
/// the outbox does next: 2xx delivered, 4xx or no answer retried, 5xx failed.
public struct ResetMailDeliverer: OutboxDeliverer {
    let sender: any MailSender
    let templates: MailTemplates
    let link: ResetLinkTemplate
    let keys: SecretKeys
    let codeTTL: TimeInterval

    public init(sender: any MailSender, templates: MailTemplates, link: ResetLinkTemplate, keys: SecretKeys, codeTTL: TimeInterval) {
        self.sender = sender
        self.templates = templates
        self.link = link
        self.keys = keys
        self.codeTTL = codeTTL
    }

    public func deliver(_ item: OutboxItem, logger: Logger) async -> DeliveryResult {
        let payload: ResetMailPayload
        do {
            payload = try JSONDecoder().decode(ResetMailPayload.self, from: keys.open(item.payload))
        } catch {
            // Sealed under another key (the key file changed): nobody can read it any more.
            return .failed("cannot open the sealed mail: the daemon's key changed")
        }
        let content = MailTemplates.Content(
            email: payload.to, code: payload.code, link: link.link(token: payload.token, email: payload.to),
            // What is left of the code's life when the mail leaves (a retried mail goes late).
            validFor: MailTemplates.duration(min(codeTTL, payload.expiresAt.timeIntervalSinceNow)), devices: payload.devices ?? [])
        let (text, html) = templates.render(content)
        let message = MailMessage(to: payload.to, subject: MailTemplates.subject, text: text, html: html)
        switch await sender.send(message, logger: logger) {
        case .accepted(let reply): return .delivered(reply)
        case .temporaryFailure(let reason): return .retry(reason)
        case .permanentFailure(let reason): return .failed(reason)
        }
    }
}

import CountersignCore
import Logging

/// The demo's mail sender when no SMTP server is configured: it hands each
/// mail to the walk-through, which prints it, instead of sending it.
final class PrintingMailSender: MailSender {
    private let mails: AsyncStream<MailMessage>
    private let continuation: AsyncStream<MailMessage>.Continuation

    init() {
        (mails, continuation) = AsyncStream.makeStream(of: MailMessage.self)
    }

    func send(_ message: MailMessage, logger: Logger) async -> MailDelivery {
        continuation.yield(message)
        return .accepted("250 printed by the demo")
    }

    var health: MailHealth { .ok }

    /// The next mail the daemon sends.
    func next() async throws -> MailMessage {
        for await message in mails { return message }
        throw CancellationError()
    }
}

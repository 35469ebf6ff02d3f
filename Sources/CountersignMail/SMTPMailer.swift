import CountersignCore
import Logging
import NIOPosix
import ServiceLifecycle
import Synchronization

/// Sends mail over SMTP with libcurl, off the event loops: each submission
/// runs on a thread of a pool of its own, so at most
/// ``SMTPConfiguration/maxConcurrentSends`` go at once. A service: the pool stops
/// when the service group shuts down (list it before the outbox sender).
public final class SMTPMailer: MailSender, Service {
    public let configuration: SMTPConfiguration
    private let pool: NIOThreadPool
    private let lastDeliveryFailed = Mutex(false)

    public init(configuration: SMTPConfiguration) {
        self.configuration = configuration
        _ = SMTPClient.globalSetup
        pool = NIOThreadPool(numberOfThreads: configuration.maxConcurrentSends)
        pool.start()
    }

    public func send(_ message: MailMessage, logger: Logger) async -> MailDelivery {
        let configuration = configuration
        let delivery: MailDelivery
        do {
            delivery = try await pool.runIfActive { SMTPClient(configuration: configuration).send(message) }
        } catch {
            delivery = .temporaryFailure("the mail sender is stopping")
        }
        let failed: Bool
        if case .accepted = delivery { failed = false } else { failed = true }
        lastDeliveryFailed.withLock { $0 = failed }
        return delivery
    }

    public var health: MailHealth { lastDeliveryFailed.withLock { $0 } ? .degraded : .ok }

    public func run() async throws {
        try? await gracefulShutdown()
        try await shutdown()
    }

    /// Stops the threads once the sends in flight are done.
    public func shutdown() async throws {
        try await pool.shutdownGracefully()
    }
}

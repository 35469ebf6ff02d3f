import CountersignCore
import Foundation
import Logging
import ServiceLifecycle

/// Speaks systemd's notify protocol: `READY=1` once the database is migrated
/// and the listener bound, `STATUS=` with a short summary, `WATCHDOG=1` at half
/// the watchdog period while the broker's expiry loop and the database answer,
/// and `STOPPING=1` when shutdown begins. Listed last in the service group, it
/// hears graceful shutdown first.
struct SystemdService: Service {
    let notifier: SystemdNotifier
    let watchdog: Duration?
    let ready: AsyncStream<Int>
    let broker: ApprovalBroker
    let store: any StoreHealth
    let push: any PushSender
    /// The listening host, for the status line.
    let host: String
    let logger: Logger

    func run() async throws {
        var iterator = ready.makeAsyncIterator()
        guard let port = await iterator.next() else { return }
        notifier.send("READY=1\nSTATUS=\(await summary(port: port))")
        logger.info("told systemd we are ready", metadata: ["watchdog": "\(watchdog.map { "\($0)" } ?? "off")"])
        let tick = watchdog.map { $0 / 2 } ?? .seconds(5)
        var sinceStatus = Duration.zero
        await withGracefulShutdownHandler {
            while !Task.isCancelled && !Task.isShuttingDownGracefully {
                try? await cancelWhenGracefulShutdown { try await Task.sleep(for: tick) }
                guard !Task.isShuttingDownGracefully else { break }
                if watchdog != nil {
                    if await healthy() {
                        notifier.send("WATCHDOG=1")
                    } else {
                        logger.error("not feeding the watchdog: the expiry loop or the database does not answer")
                    }
                }
                sinceStatus += tick
                if sinceStatus >= .seconds(5) {
                    sinceStatus = .zero
                    notifier.send("STATUS=\(await summary(port: port))")
                }
            }
        } onGracefulShutdown: {
            notifier.send("STOPPING=1\nSTATUS=shutting down")
        }
    }

    /// `listening on 127.0.0.1:8080; 2 pending, 0 approved; push disabled`
    func summary(port: Int) async -> String {
        let live = await broker.liveCounts()
        return "listening on \(host):\(port); \(live[.pending] ?? 0) pending, \(live[.approved] ?? 0) approved; push \(push.health.rawValue)"
    }

    /// The expiry loop swept recently and the database answers.
    func healthy() async -> Bool {
        guard let lastSweep = await broker.lastSweep, Date().timeIntervalSince(lastSweep) < 5 else { return false }
        return await store.ping()
    }
}

import AsyncHTTPClient
import Foundation
import Logging
import Synchronization

/// The HTTP/2 connections pushes go out on.
///
/// An AsyncHTTPClient keeps one HTTP/2 connection to a host once it has one
/// and, while that connection has no free stream (the server's
/// `SETTINGS_MAX_CONCURRENT_STREAMS`), queues further requests behind it,
/// however many. Each further client here is another connection: a send takes
/// the client with the fewest sends in flight, and once every client has
/// `sendsPerConnection` in flight, another is opened, up to `maximumConnections`;
/// past that, sends queue as before.
///
/// A client just opened takes a single send until that send has been
/// answered: before its first connection is up the client does not know the
/// server speaks HTTP/2, and would open a connection for each send waiting.
/// Meanwhile no other client is opened.
final class PushConnections: Sendable {
    private let sendsPerConnection: Int
    private let maximumConnections: Int
    private let open: (@Sendable () throws -> HTTPClient)?
    private let logger: Logger
    private let lanes: Mutex<Lanes>

    private struct Lanes {
        var all: [Lane]
        /// A client is being opened, or its first send has not been answered yet.
        var warming = false
        /// Opening a client failed: not tried again before this.
        var retryOpeningAt = Date.distantPast
    }

    private struct Lane {
        let client: HTTPClient
        var inFlight = 0
        var answered: Bool
    }

    /// `open` makes a client like `primary`; without it every send takes `primary`.
    init(
        primary: HTTPClient, sendsPerConnection: Int, maximumConnections: Int, open: (@Sendable () throws -> HTTPClient)?,
        logger: Logger = Logger(label: "countersign.push")
    ) {
        self.sendsPerConnection = max(1, sendsPerConnection)
        self.maximumConnections = max(1, maximumConnections)
        self.open = open
        self.logger = logger
        self.lanes = Mutex(Lanes(all: [Lane(client: primary, answered: true)]))
    }

    /// How many clients have been opened, the primary included.
    var count: Int { lanes.withLock { $0.all.count } }

    /// Runs `body` with the client that has the fewest sends in flight.
    func withClient<T>(_ body: (HTTPClient) async throws -> T) async throws -> T {
        let (index, client) = lease()
        defer { release(index) }
        return try await body(client)
    }

    private func lease() -> (Int, HTTPClient) {
        let opening: Bool = lanes.withLock { lanes in
            guard open != nil, !lanes.warming, lanes.all.count < maximumConnections, Date() >= lanes.retryOpeningAt,
                lanes.all.allSatisfy({ $0.inFlight >= sendsPerConnection })
            else { return false }
            lanes.warming = true
            return true
        }
        if opening, let client = openClient() {
            return lanes.withLock { lanes in
                // Lanes are only ever appended, so an index stays valid until shutdown.
                lanes.all.append(Lane(client: client, inFlight: 1, answered: false))
                return (lanes.all.count - 1, client)
            }
        }
        return lanes.withLock { lanes in
            var best: Int?
            for index in lanes.all.indices where lanes.all[index].answered {
                if best.map({ lanes.all[index].inFlight < lanes.all[$0].inFlight }) ?? true { best = index }
            }
            let index = best ?? 0
            lanes.all[index].inFlight += 1
            return (index, lanes.all[index].client)
        }
    }

    /// Opens a client outside the lock; on failure logs once and waits a minute before trying again.
    private func openClient() -> HTTPClient? {
        do {
            guard let open else { return nil }
            return try open()
        } catch {
            lanes.withLock { lanes in
                lanes.warming = false
                lanes.retryOpeningAt = Date().addingTimeInterval(60)
            }
            logger.warning("cannot open another push connection; sends share the open ones", metadata: ["error": "\(error)"])
            return nil
        }
    }

    private func release(_ index: Int) {
        lanes.withLock { lanes in
            lanes.all[index].inFlight -= 1
            if !lanes.all[index].answered {
                lanes.all[index].answered = true
                lanes.warming = false
            }
        }
    }

    /// Shuts down the clients opened here, every one even if one fails; the primary belongs to its creator.
    func shutdownOpened() async throws {
        let opened = lanes.withLock { $0.all.dropFirst().map(\.client) }
        var failure: (any Error)?
        for client in opened {
            do { try await client.shutdown() } catch { failure = failure ?? error }
        }
        if let failure { throw failure }
    }
}

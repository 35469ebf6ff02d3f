import AsyncHTTPClient
import Synchronization

/// The HTTP/2 connections pushes go out on.
///
/// An AsyncHTTPClient keeps one HTTP/2 connection to a host and, while that
/// connection has no free stream (the server's `SETTINGS_MAX_CONCURRENT_STREAMS`),
/// queues further requests behind it, however many. Each further client here
/// is another connection: a send takes the client with the fewest sends in
/// flight, and once every client has `streamsPerConnection` in flight,
/// another is opened, up to `maximumConnections`; past that, sends queue as before.
final class PushConnections: Sendable {
    private let streamsPerConnection: Int
    private let maximumConnections: Int
    private let open: (@Sendable () throws -> HTTPClient)?
    private let lanes: Mutex<[Lane]>

    private struct Lane {
        let client: HTTPClient
        var inFlight = 0
    }

    /// `open` makes a client like `primary`; without it every send takes `primary`.
    init(primary: HTTPClient, streamsPerConnection: Int, maximumConnections: Int, open: (@Sendable () throws -> HTTPClient)?) {
        self.streamsPerConnection = max(1, streamsPerConnection)
        self.maximumConnections = max(1, maximumConnections)
        self.open = open
        self.lanes = Mutex([Lane(client: primary)])
    }

    /// How many clients (connections) have been opened, the primary included.
    var count: Int { lanes.withLock { $0.count } }

    /// Runs `body` with the client that has the fewest sends in flight.
    func withClient<T>(_ body: (HTTPClient) async throws -> T) async throws -> T {
        let (index, client) = lease()
        defer { lanes.withLock { $0[index].inFlight -= 1 } }
        return try await body(client)
    }

    private func lease() -> (Int, HTTPClient) {
        lanes.withLock { lanes in
            var best = 0
            for index in lanes.indices where lanes[index].inFlight < lanes[best].inFlight { best = index }
            // Lanes are only ever appended, so an index stays valid until shutdown.
            if lanes[best].inFlight >= streamsPerConnection, lanes.count < maximumConnections, let client = try? open?() {
                lanes.append(Lane(client: client))
                best = lanes.count - 1
            }
            lanes[best].inFlight += 1
            return (best, lanes[best].client)
        }
    }

    /// Shuts down the clients opened here; the primary belongs to its creator.
    func shutdownOpened() async throws {
        let opened = lanes.withLock { $0.dropFirst().map(\.client) }
        for client in opened { try await client.shutdown() }
    }
}

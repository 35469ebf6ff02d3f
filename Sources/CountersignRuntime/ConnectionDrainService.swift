import CountersignHTTP
import Logging
import ServiceLifecycle

/// Holds the application's shutdown until the public listener's connections
/// have closed. The server stops accepting and asks each connection to close
/// once its answer in flight is written; a connection runs no task the server
/// would wait for, so this service does the waiting, before the store, the
/// audit writer and the push client behind those answers stop. Bounded: a
/// connection still open after `limit` is left to the process's exit.
struct ConnectionDrainService: Service {
    let connections: OpenConnections
    let logger: Logger
    var limit: Duration = .seconds(6)

    func run() async throws {
        try? await gracefulShutdown()
        let drained = await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                await connections.allClosed()
                return true
            }
            group.addTask {
                try? await Task.sleep(for: limit)
                return false
            }
            defer { group.cancelAll() }
            return await group.next() ?? false
        }
        if !drained {
            logger.warning("connections still open at shutdown", metadata: ["open": "\(connections.count)"])
        }
    }
}

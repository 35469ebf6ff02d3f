import Logging
import ServiceLifecycle

/// Runs a group of services for as long as some work needs them: the daemon's
/// own tests, `countersign demo` and the fake FCM all start a server this way.
public enum RunningServices {
    /// Starts `services` in a service group, waits until `readiness` reports
    /// the bound port, runs `body` with it, then shuts the group down
    /// gracefully and waits for it, whether `body` returned or threw.
    ///
    /// If the group ends before it is ready (a port already taken, a failed
    /// migration), its error is thrown instead of waiting forever.
    public static func run<T: Sendable>(
        _ services: [any Service],
        readiness: Readiness,
        logger: Logger,
        _ body: (_ port: Int) async throws -> T
    ) async throws -> T {
        let group = ServiceGroup(configuration: .init(services: services, logger: logger))
        return try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask {
                defer { readiness.continuation.finish() }
                try await group.run()
            }
            var ports = readiness.ports.makeAsyncIterator()
            guard let port = await ports.next() else {
                try await tasks.waitForAll()
                throw NotReady()
            }
            let result: Result<T, any Error>
            do {
                result = .success(try await body(port))
            } catch {
                result = .failure(error)
            }
            await group.triggerGracefulShutdown()
            try await tasks.waitForAll()
            return try result.get()
        }
    }

    /// The signal a server gives once its listener is bound.
    public struct Readiness: Sendable {
        let ports: AsyncStream<Int>
        let continuation: AsyncStream<Int>.Continuation

        public init() {
            (ports, continuation) = AsyncStream.makeStream(of: Int.self)
        }

        /// Call from the server's `onServerRunning` with the bound port.
        public func ready(port: Int) {
            continuation.yield(port)
        }
    }

    /// The services stopped before they reported ready, without an error.
    public struct NotReady: Error, CustomStringConvertible {
        public var description: String { "the services stopped before the server was ready" }
    }
}

import CountersignCore
import Foundation
import Logging
import NIOPosix
import PostgresNIO
import Synchronization

/// The PostgreSQL database behind every store port, shared by the nodes of a
/// cluster. Its transactions decide every race (the same conditional updates
/// as on SQLite); each committed transition sends `NOTIFY` in its transaction,
/// and ``follow(onChange:onGap:)`` (the ``ChangeFeed``) carries those to this node's long polls.
public final class PostgresStore: ChangeFeed, Sendable {
    let client: PostgresClient
    let configuration: PostgresConfiguration
    /// For queries: errors only.
    let logger: Logger
    /// For what the store itself reports (migrations, the notification connection).
    let eventLogger: Logger
    /// This node's name: in `/healthz`, and on the outbox leases it holds.
    public let nodeID: String
    /// The pool's own run loop. A task of the store, not a service: the
    /// operator's commands open the store (and migrate it) with no service group.
    private let running: Task<Void, Never>
    private let notificationState = Mutex("reconnecting")
    /// How long a query waits for a pooled connection before it fails as ``StoreUnavailable``.
    let connectionWait: Duration
    /// How long a query (or transaction) may run on its connection before the
    /// connection is closed under it and it fails as ``StoreUnavailable``.
    let queryLimit: Duration
    /// How often the notification connection is asked whether it still answers, and how long it has to.
    let listenerCheck: Duration
    private let waits = WaitDeadlines()
    private let watchingWaits: Task<Void, Never>
    /// Set once the schema is migrated: opening waits for its first connections
    /// as long as the pool keeps trying (a database still starting is not an outage).
    private let opened = Mutex(false)

    /// The channel every transition's `NOTIFY` goes to, with the request id as payload.
    static let channel = "countersign_changes"

    /// Connects (a pool of at most `maximumConnections`) and migrates the schema.
    public init(
        configuration: PostgresConfiguration, nodeID: String, maximumConnections: Int = 16, connectionWait: Duration? = nil,
        queryLimit: Duration? = nil, listenerCheck: Duration = .seconds(5), logger: Logger
    ) async throws {
        self.configuration = configuration
        self.nodeID = nodeID
        self.connectionWait = connectionWait ?? configuration.connectionWait
        self.queryLimit = queryLimit ?? configuration.queryLimit
        self.listenerCheck = listenerCheck
        // Queries log only errors (PostgresNIO also warns about a lease asked for before the pool runs: it waits).
        var queries = logger
        queries.logLevel = max(logger.logLevel, .error)
        self.logger = queries
        self.eventLogger = logger
        try await PostgresProbe.check(configuration, logger: queries)
        let client = PostgresClient(
            configuration: configuration.clientConfiguration(maximumConnections: maximumConnections), backgroundLogger: logger)
        self.client = client
        running = Task { await client.run() }
        watchingWaits = Task { [waits] in await waits.run() }
        do {
            try await migrate()
            opened.withLock { $0 = true }
        } catch {
            running.cancel()
            watchingWaits.cancel()
            // A newer release's database is said as it is: the operator's answer differs (run that release).
            if let newer = error as? NewerDatabaseError { throw newer }
            throw PostgresStoreError.cannotOpen(configuration.redacted, String(reflecting: error))
        }
    }

    /// Whether the database answers a trivial query.
    public func ping() async -> Bool {
        do {
            return try await value(Int.self, "SELECT 1") == 1
        } catch {
            return false
        }
    }

    public var cluster: ClusterHealth? {
        ClusterHealth(node: nodeID, notifications: notificationState.withLock { $0 })
    }

    /// Nothing to do: PostgreSQL makes its own checkpoints.
    public func checkpoint() throws {}

    public func close() throws {
        running.cancel()
        watchingWaits.cancel()
    }

    // MARK: Notifications

    /// Listens on one dedicated connection for the transitions other nodes
    /// commit, until the calling task is cancelled: `onChange` gets each
    /// request id. When the connection drops, it reconnects (back-off up to
    /// 2 s) and then calls `onGap`, since notifications sent meanwhile are
    /// lost: waiters must re-read.
    public func follow(onChange: @escaping @Sendable (String) async -> Void, onGap: @escaping @Sendable () async -> Void) async {
        var pause = Duration.milliseconds(50)
        var connected = false
        while !Task.isCancelled {
            do {
                let connection = try await PostgresConnection.connect(
                    on: MultiThreadedEventLoopGroup.singleton.any(), configuration: try configuration.connectionConfiguration(), id: 0,
                    logger: eventLogger
                ).get()
                do {
                    // The check closes a connection that no longer answers (a silent
                    // one would lose every notification), which ends the listening.
                    let checking = Task { await self.watchListener(connection) }
                    defer { checking.cancel() }
                    try await connection.listen(on: Self.channel) { notifications in
                        notificationState.withLock { $0 = "ok" }
                        if connected { eventLogger.notice("notification connection restored: long polls re-read their requests") }
                        connected = true
                        pause = .milliseconds(50)
                        await onGap()
                        for try await notification in notifications {
                            await onChange(notification.payload)
                        }
                    }
                } catch {
                    try? await connection.close()
                    throw error
                }
                try? await connection.close()
                if Task.isCancelled { break }
                eventLogger.warning("notification connection ended; reconnecting")
            } catch {
                if Task.isCancelled { break }
                eventLogger.warning("notification connection lost; reconnecting", metadata: ["error": "\(String(reflecting: error))"])
            }
            notificationState.withLock { $0 = "reconnecting" }
            try? await Task.sleep(for: pause)
            pause = min(pause * 2, .seconds(2))
        }
    }

    /// Every `listenerCheck` asks the notification connection a trivial query;
    /// one unanswered within `listenerCheck` closes the connection (its
    /// listening then ends, and the node reconnects and has its waiters re-read).
    /// Returns once it closed the connection, or when cancelled.
    private func watchListener(_ connection: PostgresConnection) async {
        while (try? await Task.sleep(for: listenerCheck)) != nil {
            do {
                _ = try await waits.bounding(
                    connection, to: listenerCheck,
                    cut: { [eventLogger] in eventLogger.warning("notification connection does not answer; reconnecting") }
                ) { try await connection.query("SELECT 1", logger: logger).collect() }
            } catch {
                return
            }
        }
    }

    // MARK: Queries

    @discardableResult
    func rows(_ query: PostgresQuery, bounded: Bool = true) async throws -> [PostgresRandomAccessRow] {
        try await withConnection(bounded: bounded) { [logger] connection in try await connection.rows(query, logger) }
    }

    func value<T: PostgresDecodable>(_ type: T.Type, _ query: PostgresQuery) async throws -> T? {
        try await rows(query).first.map { try $0[0].decode(T.self) }
    }

    /// Runs `body` in one transaction (committed when it returns, rolled back when it throws).
    func transaction<Result: Sendable>(
        bounded: Bool = true, _ body: @escaping @Sendable (PostgresConnection) async throws -> Result
    ) async throws -> Result {
        do {
            return try await withConnection(bounded: bounded) { [logger] connection in
                try await connection.withTransaction(logger: logger) { connection in try await body(connection) }
            }
        } catch let error as PostgresTransactionError {
            // Callers catch what the body threw (a taken idempotency key, say), not its wrapper.
            throw error.closureError ?? error.beginError ?? error.commitError ?? error
        }
    }

    /// Runs `body` on a pooled connection, waiting at most `connectionWait` for
    /// one. While the database does not answer, the pool keeps trying to connect
    /// and a caller would wait as long: here it gets ``StoreUnavailable``
    /// instead (503 to a client), so `/healthz` answers and requests do not pile
    /// up through an outage. Until the store is open (migrated), the wait has no
    /// bound of its own.
    ///
    /// Once `body` has its connection it may run for `queryLimit` when `bounded`:
    /// past that the connection is closed under it, which fails its statement at
    /// once (StoreUnavailable). A database that stops answering on an open
    /// connection (a frozen server, a failover that leaves the old address
    /// silent) would otherwise hold the caller until TCP gives up, minutes
    /// later. A transaction cut so may still have committed, as with any
    /// connection lost at commit. Long upkeep (pruning, importing) runs unbounded.
    func withConnection<Result: Sendable>(
        bounded: Bool = true, _ body: @escaping @Sendable (PostgresConnection) async throws -> Result
    ) async throws -> Result {
        guard opened.withLock({ $0 }) else { return try await client.withConnection { connection in try await body(connection) } }
        let wait = ConnectionWait<Result>()
        let lease = Task { [client, waits, queryLimit, eventLogger] in
            do {
                let result = try await client.withConnection { connection in
                    // A connection handed over after the wait was given up is not used.
                    guard wait.claim() else { throw CancellationError() }
                    guard bounded else { return try await body(connection) }
                    return try await waits.bounding(
                        connection, to: queryLimit,
                        cut: {
                            eventLogger.warning(
                                "a query ran past its limit; its connection is closed under it", metadata: ["limit": "\(queryLimit)"])
                        }
                    ) { try await body(connection) }
                }
                wait.settle(.success(result))
            } catch {
                wait.settle(.failure(error))
            }
        }
        let watched = waits.add(deadline: .now + connectionWait) { if wait.abandon(StoreUnavailable()) { lease.cancel() } }
        defer { waits.remove(watched) }
        do {
            return try await withTaskCancellationHandler {
                try await wait.value()
            } onCancel: {
                // A caller that gave up itself (a long poll closed, a shutdown) is not an outage.
                if wait.abandon(CancellationError()) { lease.cancel() }
            }
        } catch {
            // What the body threw is the caller's, unless the connection was lost under it.
            if wait.isClaimed { throw Self.isConnectionLoss(error) ? StoreUnavailable() : error }
            if error is StoreUnavailable || error is CancellationError { throw error }
            // The pool refused the lease (its circuit breaker, a shutdown).
            try Task.checkCancellation()
            throw StoreUnavailable()
        }
    }
}

extension PostgresStore {
    /// Whether `error` says the connection went away (closed on either side,
    /// as PostgresNIO reports a connection the server ended, or ended by the
    /// server: SQLSTATE class 08, connection exception, or 57P, operator
    /// intervention such as an administrator's termination or a shutdown), not
    /// that the statement was refused.
    static func isConnectionLoss(_ error: any Error) -> Bool {
        if let wrapped = error as? PostgresTransactionError {
            return [wrapped.beginError, wrapped.closureError, wrapped.commitError].contains { $0.map(isConnectionLoss) ?? false }
        }
        guard let error = error as? PSQLError else { return false }
        switch error.code {
        case .serverClosedConnection, .clientClosedConnection, .connectionError, .uncleanShutdown:
            return true
        case .server:
            let state = error.serverInfo?[.sqlState] ?? ""
            return state.hasPrefix("08") || state.hasPrefix("57P")
        default:
            return false
        }
    }
}

/// One caller's wait for a pooled connection, settled once: by the body
/// claiming its connection, or by the wait being given up (its bound passed,
/// or its caller cancelled), whichever comes first. The caller's answer does
/// not depend on the pool noticing a cancellation: a lease cancelled just as
/// it is queued may stay queued until the pool next has a connection.
private final class ConnectionWait<Value: Sendable>: Sendable {
    private enum Phase { case waiting, claimed, abandoned }

    private struct State {
        var phase = Phase.waiting
        var outcome: Result<Value, any Error>?
        var continuation: CheckedContinuation<Value, any Error>?
    }

    private let state = Mutex(State())

    /// The body may use its connection: `false` once the wait was given up.
    func claim() -> Bool {
        state.withLock { state in
            guard case .waiting = state.phase else { return false }
            state.phase = .claimed
            return true
        }
    }

    var isClaimed: Bool {
        state.withLock { state in
            if case .claimed = state.phase { return true }
            return false
        }
    }

    /// Gives the wait up unless the body has its connection: the caller gets `error` at once.
    func abandon(_ error: any Error) -> Bool {
        let (given, waiting) = state.withLock { state -> (Bool, CheckedContinuation<Value, any Error>?) in
            guard case .waiting = state.phase else { return (false, nil) }
            state.phase = .abandoned
            return (true, Self.settle(&state, .failure(error)))
        }
        waiting?.resume(throwing: error)
        return given
    }

    /// The caller's answer, unless it has one already.
    func settle(_ outcome: Result<Value, any Error>) {
        let waiting = state.withLock { Self.settle(&$0, outcome) }
        waiting?.resume(with: outcome)
    }

    /// Records the answer if none is; the caller's continuation, if it waits, to resume outside the lock.
    private static func settle(_ state: inout State, _ outcome: Result<Value, any Error>) -> CheckedContinuation<Value, any Error>? {
        guard state.outcome == nil else { return nil }
        state.outcome = outcome
        defer { state.continuation = nil }
        return state.continuation
    }

    func value() async throws -> Value {
        try await withCheckedThrowingContinuation { continuation in
            let settled = state.withLock { state -> Result<Value, any Error>? in
                if let outcome = state.outcome { return outcome }
                state.continuation = continuation
                return nil
            }
            if let settled { continuation.resume(with: settled) }
        }
    }
}

extension PostgresStore {
    /// Makes the transactions that name the same `kind` and `key` take turns
    /// until each commits (a transaction-scoped advisory lock on a hash of
    /// both; two keys sharing a hash only wait for each other). Under READ
    /// COMMITTED a racing transaction cannot see a row another has just
    /// inserted, so "replace what is live, then insert" needs this.
    static func serialize(_ kind: String, _ key: String, _ connection: PostgresConnection, _ logger: Logger) async throws {
        try await connection.run("SELECT pg_advisory_xact_lock(hashtext(\(kind)), hashtext(\(key)))", logger)
    }
}

extension PostgresConnection {
    func rows(_ query: PostgresQuery, _ logger: Logger) async throws -> [PostgresRandomAccessRow] {
        var rows: [PostgresRandomAccessRow] = []
        for try await row in try await self.query(query, logger: logger) {
            rows.append(row.makeRandomAccess())
        }
        return rows
    }

    /// Runs a statement; returns how many rows it returned (with `RETURNING`: how many it changed).
    @discardableResult
    func run(_ query: PostgresQuery, _ logger: Logger) async throws -> Int {
        try await rows(query, logger).count
    }
}

extension PostgresRandomAccessRow {
    func get<T: PostgresDecodable>(_ column: String, as type: T.Type = T.self) throws -> T {
        try self[column].decode(T.self)
    }
}

extension Date {
    /// Times are stored as Unix seconds (double precision), as on SQLite.
    var stored: Double { timeIntervalSince1970 }
}

public enum PostgresStoreError: Error, CustomStringConvertible {
    case cannotOpen(String, String)
    case corrupt(String)

    public var description: String {
        switch self {
        case .cannotOpen(let url, let reason): "cannot open database \(url): \(reason)"
        case .corrupt(let reason): reason
        }
    }
}

import CountersignCore
import CountersignPostgres
import CountersignStore
import Foundation
import Logging

/// What `--database` names: an SQLite file (the embedded default), or a
/// PostgreSQL database shared by the nodes of a cluster.
public enum DatabaseLocation: Sendable, Equatable {
    case sqlite(path: String)
    case postgres(PostgresConfiguration)

    /// The systemd credential holding the PostgreSQL password.
    public static let passwordCredential = "database-password"

    /// A cluster's database from its URL; `password` is used when the URL carries none;
    /// the bounds on waits and queries replace the defaults when given.
    public static func postgres(
        url: String, password: String?, connectionWait: Duration? = nil, queryLimit: Duration? = nil
    ) throws -> DatabaseLocation {
        var postgres: PostgresConfiguration
        do {
            postgres = try PostgresConfiguration(url: url, password: password)
        } catch {
            throw ConfigurationError("invalid PostgreSQL URL in --database: \(error.description)")
        }
        if let connectionWait { postgres.connectionWait = connectionWait }
        if let queryLimit { postgres.queryLimit = queryLimit }
        return .postgres(postgres)
    }

    /// The database as logs and messages may show it (never a password).
    public var display: String {
        switch self {
        case .sqlite(let path): path
        case .postgres(let postgres): postgres.redacted
        }
    }

    public var isCluster: Bool {
        if case .postgres = self { return true }
        return false
    }

    /// Opens (and migrates) the database.
    /// - Parameter nodeID: a cluster node's name (its outbox leases, `/healthz`), asked for only on PostgreSQL.
    public func open(nodeID: () -> String, logger: Logger) async throws -> OpenedDatabase {
        switch self {
        case .sqlite(let path):
            return OpenedDatabase(store: try SQLiteStore(path: path, logger: logger))
        case .postgres(let postgres):
            let store = try await PostgresStore(configuration: postgres, nodeID: nodeID(), logger: logger)
            return OpenedDatabase(store: store, sharedCounters: store, changes: store)
        }
    }

    /// A node's default name: host name and port (process id when the port is chosen by the system).
    public static func defaultNodeID(port: Int) -> String {
        let host = hostName()
        return port == 0 ? "\(host)-pid\(getpid())" : "\(host):\(port)"
    }

    /// This machine's name, as `gethostname` gives it (no resolver lookup).
    public static func hostName() -> String {
        var buffer = [CChar](repeating: 0, count: 256)
        guard gethostname(&buffer, buffer.count - 1) == 0 else { return "localhost" }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

/// An open database, and what a cluster's shares with the other nodes.
public struct OpenedDatabase: Sendable {
    /// Every store port.
    public let store: any CountersignStorage
    /// Where rate limits are counted for every node at once; `nil`: in this node's memory.
    public let sharedCounters: (any ClusterLimitCounter)?
    /// The other nodes' transitions; `nil`: no other process writes the database.
    public let changes: (any ChangeFeed)?

    public init(store: any CountersignStorage, sharedCounters: (any ClusterLimitCounter)? = nil, changes: (any ChangeFeed)? = nil) {
        self.store = store
        self.sharedCounters = sharedCounters
        self.changes = changes
    }
}

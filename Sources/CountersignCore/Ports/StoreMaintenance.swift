import Foundation

/// The database did not answer in time (a shared database down or out of
/// reach): answer 503 `unavailable` and let the client retry.
public struct StoreUnavailable: Error, Equatable, CustomStringConvertible {
    public init() {}
    public var description: String { "the database did not answer in time (no connection within the wait)" }
}

/// Whether the database answers: for `/healthz` and the systemd watchdog.
public protocol StoreHealth: Sendable {
    func ping() async -> Bool
    /// For a database shared by a cluster: this node's id and whether its
    /// notification connection is up; `nil` for an embedded database.
    var cluster: ClusterHealth? { get }
}

public struct ClusterHealth: Sendable, Equatable {
    public var node: String
    /// `ok`, or `reconnecting` while the node's notification connection is down.
    public var notifications: String

    public init(node: String, notifications: String) {
        self.node = node
        self.notifications = notifications
    }
}

/// Upkeep of a running store: pruning by age, and a clean close on shutdown.
public protocol StoreMaintenance: StoreHealth, AuditStore {
    /// Removes terminal requests last changed before `date`; returns how many.
    func pruneFinishedRequests(before date: Date) async throws -> Int
    /// Removes email resets and outbox items that ended or expired before `date`; returns how many.
    func pruneFinishedResets(before date: Date) async throws -> Int
    /// Flushes what the backend buffers (SQLite: the WAL) before closing.
    func checkpoint() throws
    func close() throws
}

/// Everything the daemon needs of a database. A backend implements these ports and nothing else.
public typealias CountersignStorage = ApprovalStore & AccountStore & EmailResetStore & OutboxStore & IntegrationStore & StoreMaintenance
    & OfflineCodeStore & RemovalStore

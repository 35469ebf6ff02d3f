import CountersignCore
import CountersignPostgres
import CountersignStore
import Foundation
import Logging
import Testing

/// A backend of the store ports, for tests that run on both.
public enum Backend: String, CaseIterable, CustomTestStringConvertible, Sendable {
    case sqlite
    case postgres

    public var testDescription: String { rawValue }

    /// SQLite always; PostgreSQL when a server can be started here (always in CI).
    public static let available: [Backend] = PostgresTestServer.isAvailable ? [.sqlite, .postgres] : [.sqlite]

    /// A new, empty database of this backend: a file in `folder`, or a database on the test server.
    public func newDatabase(in folder: URL) async throws -> String {
        switch self {
        case .sqlite: folder.appendingPathComponent("store.sqlite").path
        case .postgres: try await PostgresTestServer.shared().newDatabase()
        }
    }

    /// A store on `database` (on PostgreSQL, as cluster node `node`).
    public func open(_ database: String, node: String = "node-a") async throws -> any CountersignStorage {
        switch self {
        case .sqlite: try SQLiteStore(path: database, logger: Logger(label: "test"))
        case .postgres: try await PostgresStore(configuration: try PostgresConfiguration(url: database), nodeID: node, logger: Logger(label: "test"))
        }
    }
}

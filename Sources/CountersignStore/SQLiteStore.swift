import CountersignCore
import Foundation
import GRDB
import Logging

/// The SQLite database behind every store port: one file in WAL mode, with
/// `synchronous = FULL` so that a committed transition survives a crash or
/// power loss before the HTTP answer leaves.
public final class SQLiteStore: Sendable {
    let pool: DatabasePool
    /// A read-only connection of its own for ``readNow(_:)``. Not one of the
    /// pool's readers: an asynchronous read holds its reader until its task
    /// resumes on the cooperative pool, so a pool reader waited for on a
    /// cooperative thread could be one that thread's own peers never give back.
    /// Nothing awaits while holding this one.
    let lookups: DatabaseQueue
    /// Creates, transitions and audit batches: those arriving together share one transaction and fsync.
    let group: GroupCommit
    public let path: String

    /// Opens (creating if needed) the database at `path` and migrates it.
    public init(path: String, logger: Logger) throws {
        var configuration = Configuration()
        configuration.foreignKeysEnabled = true
        configuration.busyMode = .timeout(5)
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA synchronous = FULL")
        }
        let directory = URL(fileURLWithPath: path).deletingLastPathComponent().path
        guard FileManager.default.fileExists(atPath: directory) else {
            throw StoreError.missingDirectory(directory)
        }
        Self.tighten(path, logger: logger)
        do {
            pool = try DatabasePool(path: path, configuration: configuration)
        } catch {
            throw StoreError.cannotOpen(path, "\(error)")
        }
        self.path = path
        // Where commits happen. GRDB's pool sets `synchronous = NORMAL` on its writer when it
        // turns WAL on, after `prepareDatabase` ran: under NORMAL a commit is not synced, and the
        // last ones can be lost with the power though their answers left. FULL again, here.
        // Checkpoints every 10,000 WAL pages (about 40 MB; SQLite's default is 1,000): the pages
        // a create touches again and again (the tables' and indexes' last pages) are copied to
        // the database once per checkpoint, and a checkpoint, which runs on the writer inside the
        // commit that crosses the mark (its callers wait for it), comes a tenth as often.
        try pool.writeWithoutTransaction { db in
            try db.execute(sql: "PRAGMA synchronous = FULL")
            try db.execute(sql: "PRAGMA wal_autocheckpoint = 10000")
        }
        // The shared statements (CountersignSQL) use RETURNING (3.35), UPDATE … FROM (3.33) and upserts (3.24).
        let version = try pool.read { db in try String.fetchOne(db, sql: "SELECT sqlite_version()") } ?? ""
        guard Self.isRecentEnough(sqliteVersion: version) else {
            throw StoreError.cannotOpen(path, "SQLite \(version) is older than \(Self.oldestSQLite), which countersign needs")
        }
        group = GroupCommit(pool: pool)
        let migrator = Self.migrator
        let before = try pool.read { db in try migrator.appliedIdentifiers(db) }
        let unknown = before.subtracting(migrator.migrations)
        guard unknown.isEmpty else {
            throw NewerDatabaseError(database: path, unknown: unknown.sorted(), newestKnown: migrator.migrations.last ?? "")
        }
        try migrator.migrate(pool)
        let after = try pool.read { db in try migrator.appliedIdentifiers(db) }
        if after.count != before.count {
            logger.info("database migrated", metadata: ["path": "\(path)", "migrations": "\(after.subtracting(before).sorted())"])
        }
        var lookupConfiguration = Configuration()
        lookupConfiguration.readonly = true
        lookupConfiguration.busyMode = .timeout(5)
        lookups = try DatabaseQueue(path: path, configuration: lookupConfiguration)
    }

    static let oldestSQLite = "3.35.0"

    /// Whether a `sqlite_version()` is at least ``oldestSQLite``.
    static func isRecentEnough(sqliteVersion: String) -> Bool {
        let have = sqliteVersion.split(separator: ".").map { Int($0) ?? 0 }
        let need = oldestSQLite.split(separator: ".").map { Int($0) ?? 0 }
        return !have.isEmpty && !have.lexicographicallyPrecedes(need)
    }

    /// Whether the database answers a trivial query.
    public func ping() async -> Bool {
        do {
            return try await pool.read { db in try Int.fetchOne(db, sql: "SELECT 1") } == 1
        } catch {
            return false
        }
    }

    /// Ends the WAL into the main file; used on shutdown.
    public func checkpoint() throws {
        try pool.writeWithoutTransaction { db in
            _ = try db.checkpoint(.truncate)
        }
    }

    public func close() throws {
        defer { try? lookups.close() }
        try pool.close()
    }

    /// A read by an indexed key on a request's path, run on the calling thread
    /// through ``lookups``. In WAL mode a reader never waits for the writer,
    /// and such a read takes a few microseconds: less than the two thread
    /// hand-offs of an asynchronous read, which took a quarter of the time of
    /// `POST /v1/approvals`. Scans and anything that may wait stay asynchronous.
    /// One statement each: its own snapshot, so no transaction around it.
    func readNow<T>(_ body: (Database) throws -> T) throws -> T { try lookups.inDatabase(body) }
}

public enum StoreError: Error, CustomStringConvertible {
    case missingDirectory(String)
    case cannotOpen(String, String)

    public var description: String {
        switch self {
        case .missingDirectory(let directory): "database folder \(directory) does not exist"
        case .cannotOpen(let path, let reason): "cannot open database \(path): \(reason)"
        }
    }
}

extension Date {
    /// Times are stored as Unix seconds (REAL), so SQL can compare them.
    var storedValue: Double { timeIntervalSince1970 }
}

extension SQLiteStore {
    /// The settings ``pragma(_:)`` and ``readerPragma(_:)`` read: settings only, none of the
    /// pragmas that act (`wal_checkpoint`, `optimize`, …).
    static let readablePragmas: Set<String> = ["journal_mode", "synchronous", "temp_store", "wal_autocheckpoint", "foreign_keys", "busy_timeout"]

    /// The value of a PRAGMA on the connection that writes, as text (for checks and diagnostics).
    public func pragma(_ name: String) throws -> String? {
        try Self.readablePragmas.contains(name) ? pool.writeWithoutTransaction { db in try Self.value(of: name, db) } : nil
    }

    /// The value of a PRAGMA on a connection that reads.
    public func readerPragma(_ name: String) throws -> String? {
        try Self.readablePragmas.contains(name) ? pool.read { db in try Self.value(of: name, db) } : nil
    }

    private static func value(of pragma: String, _ db: Database) throws -> String? { try String.fetchOne(db, sql: "PRAGMA \(pragma)") }
}

extension SQLiteStore: StoreMaintenance {}

extension SQLiteStore {
    /// One process owns the file: no cluster.
    public var cluster: ClusterHealth? { nil }

    /// The database holds webhook secrets and password hashes: a file of it
    /// that others may read (made before the daemon set its umask, or copied)
    /// is made owner-only, with a warning.
    static func tighten(_ path: String, logger: Logger) {
        for file in [path, path + "-wal", path + "-shm"] {
            guard let attributes = try? FileManager.default.attributesOfItem(atPath: file),
                let mode = (attributes[.posixPermissions] as? NSNumber)?.uint16Value, mode & 0o077 != 0
            else { continue }
            do {
                try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: file)
                logger.warning(
                    "database file was readable by others: made owner-only (0600)", metadata: ["file": "\(file)", "was": "\(String(mode, radix: 8))"])
            } catch {
                logger.error(
                    "database file is readable by others and could not be made owner-only", metadata: ["file": "\(file)", "error": "\(error)"])
            }
        }
    }
}

import CountersignCore
import Foundation
import GRDB

#if canImport(Glibc)
import Glibc
#endif

extension SQLiteStore {
    /// Copies the database at `source` to `destination` while the daemon
    /// serves, with SQLite's online backup: a consistent snapshot holding every
    /// transaction committed before it started. The source is opened read-only
    /// and never migrated (a newer binary's backup leaves the running daemon's
    /// schema as it is). The copy is created exclusively (never over a file)
    /// and checked (`PRAGMA integrity_check`) before this returns; on any
    /// failure it is removed.
    public static func backup(from source: String, to destination: String) throws {
        let descriptor = Glibc.open(destination, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            throw BackupError(
                errno == EEXIST
                    ? "\(destination) exists already: back up to a new file" : "cannot create \(destination): \(String(cString: strerror(errno)))")
        }
        Glibc.close(descriptor)
        do {
            var configuration = Configuration()
            configuration.readonly = true
            let original = try DatabasePool(path: source, configuration: configuration)
            defer { try? original.close() }
            let copy = try DatabaseQueue(path: destination)
            defer { try? copy.close() }
            try original.backup(to: copy)
            let verdict = try copy.read { db in try String.fetchOne(db, sql: "PRAGMA integrity_check") }
            guard verdict == "ok" else { throw BackupError("the copy at \(destination) fails its integrity check: \(verdict ?? "no answer")") }
            // One file: the copy needs no WAL beside it.
            try copy.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA journal_mode = DELETE") }
        } catch {
            try? FileManager.default.removeItem(atPath: destination)
            throw (error as? BackupError) ?? BackupError("cannot back up to \(destination): \(error)")
        }
    }
}

public struct BackupError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

import CountersignCore
import Foundation
import GRDB

extension SQLiteStore {
    /// Copies the database to `path` while the daemon serves, with SQLite's
    /// online backup: a consistent snapshot holding every transaction committed
    /// before it started. The copy is checked (`PRAGMA integrity_check`) before
    /// this returns; a file already at `path` is never replaced.
    public func backup(to path: String) throws {
        guard !FileManager.default.fileExists(atPath: path) else { throw BackupError("\(path) exists already: back up to a new file") }
        do {
            let copy = try DatabaseQueue(path: path)
            defer { try? copy.close() }
            try pool.backup(to: copy)
            let verdict = try copy.read { db in try String.fetchOne(db, sql: "PRAGMA integrity_check") }
            guard verdict == "ok" else { throw BackupError("the copy at \(path) fails its integrity check: \(verdict ?? "no answer")") }
            // One file: the copy needs no WAL beside it.
            try copy.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA journal_mode = DELETE") }
        } catch let error as BackupError {
            try? FileManager.default.removeItem(atPath: path)
            throw error
        } catch {
            try? FileManager.default.removeItem(atPath: path)
            throw BackupError("cannot back up to \(path): \(error)")
        }
    }
}

public struct BackupError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

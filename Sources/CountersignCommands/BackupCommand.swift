import ArgumentParser
import CountersignCore
import CountersignPush
import CountersignRuntime
import CountersignStore
import Foundation
import Logging

/// `countersign backup --to FILE`: the database and the secret key, together, while the daemon serves.
struct Backup: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Copy the SQLite database (online, while the daemon serves) and its secret key, to be restored together.",
        discussion: """
            The copy is a consistent snapshot: every change the daemon acknowledged before the backup started is in it. It is \
            checked (PRAGMA integrity_check) before the command succeeds. The secret key is copied beside it as FILE.key (and the \
            VAPID key, when there is one, as FILE.vapid.pem), mode 0600: without the key, reset codes, queued mail, bypass codes \
            and offline secrets in the copy cannot be used. Keep both where the database is kept safe. To restore: stop the \
            daemon, put FILE back as the database and FILE.key as its secret key (countersign.key beside it, or --secret-key-file), \
            start it. On PostgreSQL, use pg_dump and keep the nodes' secret key with the dump.
            """)

    @Option(help: ArgumentHelp("The new backup file (never replaced).", valueName: "file")) var to: String
    @Option(\.secretKeyFile) var secretKeyFile: String?
    @OptionGroup var database: DatabaseOptions

    func run() async throws {
        let loader = try await loadOrExit { try database.loader(self) }
        guard case .sqlite(let path) = try await loadOrExit({ try loader.database() }) else {
            throw CommandFailure("the database is PostgreSQL: back it up with pg_dump, and keep the nodes' secret key with the dump")
        }
        try ServiceUser.become(ownerOf: path)
        let keyPath = try await loadOrExit { try loader.secretKeyPath() }
        guard FileManager.default.fileExists(atPath: keyPath) else {
            throw CommandFailure("no secret key at \(keyPath): a backup without it cannot be used; give --secret-key-file")
        }
        // The VAPID key where `serve` finds it (configured, a credential, or beside the database), when there is one.
        let configuredVAPID = (try? loader.pushConfiguration())?.webPush?.vapidKeyFile
        let beside = URL(fileURLWithPath: path).deletingLastPathComponent().appendingPathComponent("countersign.vapid.pem").path
        let vapid = [configuredVAPID, beside].compactMap { $0 }.first { FileManager.default.fileExists(atPath: $0) }
        let keyCopy = to + ".key"
        let vapidCopy = to + ".vapid.pem"
        // Every target is free before anything is written: a failed backup leaves nothing behind to block the next.
        for target in [to, keyCopy] + (vapid == nil ? [] : [vapidCopy]) where FileManager.default.fileExists(atPath: target) {
            throw CommandFailure("\(target) exists already: back up to a new file")
        }
        guard FileManager.default.fileExists(atPath: path) else { throw CommandFailure("no database at \(path)") }
        var copied: [String] = []
        do {
            try SQLiteStore.backup(from: path, to: to)
            copied.append(to)
            try FileManager.default.copyItem(atPath: keyPath, toPath: keyCopy)
            copied.append(keyCopy)
            if let vapid {
                try FileManager.default.copyItem(atPath: vapid, toPath: vapidCopy)
                copied.append(vapidCopy)
            }
        } catch {
            for file in copied { try? FileManager.default.removeItem(atPath: file) }
            throw CommandFailure("\(error)")
        }
        for file in copied { try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: file) }
        print(
            "backed up \(path) to \(to) (integrity check: ok); secret key to \(keyCopy)" + (copied.count > 2 ? "; VAPID key to \(to).vapid.pem" : ""))
    }
}

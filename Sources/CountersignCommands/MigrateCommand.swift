import ArgumentParser
import CountersignCore
import CountersignPostgres
import CountersignRuntime
import CountersignStore
import Foundation
import Logging

/// `countersign migrate --from PATH --to postgres://…`: moves a daemon from
/// its SQLite file to a cluster's PostgreSQL database.
struct Migrate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Copy users, devices, integrations, live requests and the audit trail from an SQLite file into an empty PostgreSQL database.",
        discussion: """
            Stop the daemon first. Live requests keep their ids and deadlines; finished requests, used codes and sent mail stay \
            behind. Give every node the SQLite daemon's secret key (countersign.key beside the file) with --secret-key-file.
            """)

    @Flag(help: "List the database's schema versions, applied and pending (the next start applies them), and refuse one a newer release made.")
    var status = false
    @Option(help: ArgumentHelp("The SQLite database file to copy from.", valueName: "file")) var from: String?
    @Option(help: ArgumentHelp("The empty PostgreSQL database to copy into: postgres://USER@HOST:PORT/DATABASE?sslmode=…", valueName: "url"))
    var to: String?
    @OptionGroup var database: DatabaseOptions

    func validate() throws {
        if status {
            guard from == nil, to == nil else { throw ValidationError("--status reads the database of --database or --config, not --from/--to") }
        } else {
            guard from != nil, to != nil else { throw ValidationError("give --from FILE --to postgres://… to copy, or --status") }
        }
    }

    func run() async throws {
        guard !status else { return try await printStatus() }
        guard let from, let to else { return }
        guard FileManager.default.fileExists(atPath: from) else { throw CommandFailure("no SQLite database at \(from)") }
        guard PostgresConfiguration.isURL(to) else { throw ValidationError("--to must be a postgres:// URL") }
        var given = GivenSettings(database)
        given.values[Settings.table.database.flag] = to
        let target = try await loadOrExit { try given.loader(config: database.config).database() }
        guard case .postgres(let settings) = target else { throw ValidationError("--to must be a postgres:// URL") }
        try ServiceUser.become(ownerOf: from)
        var logger = Logger(label: "countersign")
        logger.logLevel = .warning
        let source = try await loadOrExit { try SQLiteStore(path: from, logger: logger) }
        let destination = try await loadOrExit {
            try await PostgresStore(configuration: settings, nodeID: "migrate-\(DatabaseLocation.hostName())", logger: logger)
        }
        defer { try? destination.close() }
        guard try await destination.isEmpty() else {
            Console.current.writeError("countersign: \(settings.redacted) is not empty; migrate copies only into an empty database\n")
            throw ExitCode.failure
        }
        var tables: [(table: MigratedTable, rows: [[(column: String, value: StoredValue)]])] = []
        for table in MigratedTable.allCases {
            tables.append((table, try await source.export(table)))
        }
        try await destination.importRows(tables)
        print("copied from \(from) to \(settings.redacted):")
        for (table, rows) in tables {
            print("  \(table.rawValue): \(rows.count)")
        }
    }

    /// `migrate --status`: applied and pending migrations, read without migrating; exit 78 for a newer release's database.
    func printStatus() async throws {
        let location = try await loadOrExit { try database.loader().database() }
        var logger = Logger(label: "countersign")
        logger.logLevel = .warning
        let status: MigrationStatus
        switch location {
        case .sqlite(let path):
            guard FileManager.default.fileExists(atPath: path) else { throw CommandFailure("no database at \(path)") }
            try ServiceUser.become(ownerOf: path)
            status = try SQLiteStore.migrationStatus(path: path)
        case .postgres(let settings):
            status = try await PostgresStore.migrationStatus(configuration: settings, logger: logger)
        }
        for name in status.applied { print("applied  \(name)") }
        for name in status.pending { print("pending  \(name)") }
        for name in status.unknown { print("unknown  \(name)  (from a newer release)") }
        if !status.unknown.isEmpty {
            throw configurationFault("the database was migrated by a newer release: this one refuses to run on it")
        }
    }
}

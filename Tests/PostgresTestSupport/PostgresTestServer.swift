import Foundation
import Synchronization
import TestSupport

#if canImport(Glibc)
import Glibc
#endif

/// A throw-away PostgreSQL server for the tests (`scripts/pg-test-server.sh`):
/// one per test process, started on first use on a free loopback port, and
/// stopped by its watchdog when the test process ends, also on a crash.
public struct PostgresTestServer: Sendable {
    public let port: Int
    public let password: String
    /// The certificate authority that signed the server's TLS certificate (PEM).
    public let certificateAuthorityFile: String

    /// Why the PostgreSQL tests did not run, for the line Swift Testing prints.
    public static let skipNote =
        "PostgreSQL is not installed: run `apt-get install postgresql` (Debian), then `swift test`; .ci/run installs it and never skips these"

    /// Whether the tests that need PostgreSQL run: a server is installed, or
    /// `COUNTERSIGN_REQUIRE_POSTGRES` is set (CI), where a missing one fails them.
    public static var isAvailable: Bool {
        if ProcessInfo.processInfo.environment["COUNTERSIGN_REQUIRE_POSTGRES"] != nil { return true }
        let versions = (try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib/postgresql")) ?? []
        return versions.contains { FileManager.default.isExecutableFile(atPath: "/usr/lib/postgresql/\($0)/bin/initdb") }
    }

    private static let started = Mutex<Task<PostgresTestServer, any Error>?>(nil)

    /// The process's server, started on first use. Starting blocks for seconds
    /// (initdb, pg_ctl), so it runs on a thread of its own and every caller
    /// awaits the same start: a blocked caller would hold one of the few
    /// threads every test's tasks run on, and stall them all.
    public static func shared() async throws -> PostgresTestServer {
        let task = started.withLock { started in
            if let started { return started }
            let task = Task<PostgresTestServer, any Error> { try await onOwnThread { try start() } }
            started = task
            return task
        }
        return try await task.value
    }

    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("scripts/pg-test-server.sh").path

    private static func start() throws -> PostgresTestServer {
        let (status, output) = try run("/usr/bin/env", ["bash", script, "\(getpid())"])
        let fields = output.split(whereSeparator: \.isWhitespace)
        guard status == 0, fields.count == 3, let port = Int(fields[0]) else {
            throw PostgresTestError("cannot start PostgreSQL (\(script)): \(output)")
        }
        return PostgresTestServer(port: port, password: String(fields[1]), certificateAuthorityFile: "\(fields[2])/ca.crt")
    }

    /// A new, empty database; its URL.
    public func newDatabase() async throws -> String {
        let name = "t_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
        try await psql("CREATE DATABASE \(name)")
        return url(database: name)
    }

    /// The database a URL of ``newDatabase()`` names.
    public static func databaseName(of url: String) -> String {
        URLComponents(string: url).map { String($0.path.dropFirst()) } ?? ""
    }

    /// A connection may take 60 s to open: a hang detector (the suite keeps the
    /// server and both cores busy), not the 5 s a user has.
    public func url(database: String) -> String {
        "postgres://countersign:\(password)@127.0.0.1:\(port)/\(database)?sslmode=disable&connect_timeout=60"
    }

    /// Runs SQL as the superuser; the output, unaligned, without headers.
    /// `psql` runs on a thread of its own while the caller waits: a test
    /// process has as many shared threads as cores, and a queue of tests each
    /// blocking one for a `CREATE DATABASE` stalled every in-process server
    /// for seconds (pushes to the fake FCM ran out of time).
    @discardableResult
    public func psql(_ sql: String, database: String = "postgres") async throws -> String {
        try await onOwnThread { try psqlBlocking(sql, database: database) }
    }

    /// ``psql(_:database:)`` on the caller's thread, for `defer` blocks only.
    @discardableResult
    public func psqlBlocking(_ sql: String, database: String = "postgres") throws -> String {
        let (status, output) = try Self.run(
            "/usr/bin/env", ["psql", "-X", "-q", "-A", "-t", "-h", "127.0.0.1", "-p", "\(port)", "-U", "countersign", "-d", database, "-c", sql],
            environment: ["PGPASSWORD": password])
        guard status == 0 else { throw PostgresTestError("psql failed: \(output)") }
        return output.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Runs a command to its end (``runToEnd(_:_:environment:input:)``): the
    /// server and its watchdog outlive the command and keep what they inherit,
    /// which Foundation's `Process` would wait for.
    static func run(_ executable: String, _ arguments: [String], environment: [String: String] = [:]) throws -> (Int32, String) {
        try runToEnd(executable, arguments, environment: environment)
    }
}

public struct PostgresTestError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

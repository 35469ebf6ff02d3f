import CountersignPostgres
import CountersignRuntime
import Foundation
import Logging
import TestSupport
import Testing

/// `--database` as a cluster's URL: where the password comes from, what the
/// logs may show, and one-line errors for what cannot work.
@Suite struct DatabaseConfigurationTests {
    func database(_ flags: [String: String], environment: [String: String] = [:]) throws -> DatabaseLocation {
        try ConfigurationLoader(flags: flags, environment: environment, configFile: nil).database()
    }

    /// A cluster's two bounds on the database: defaults, environment, flag, and a bad value named with its source.
    @Test func theConnectionWaitAndQueryLimitAreSettings() throws {
        let url = "postgres://countersign@db.internal/auth"
        guard case .postgres(let defaults) = try database(["--database": url]) else {
            Issue.record("not PostgreSQL")
            return
        }
        #expect(defaults.connectionWait == .seconds(5) && defaults.queryLimit == .seconds(30))
        guard
            case .postgres(let set) = try database(
                ["--database": url, "--database-query-limit": "120"], environment: ["COUNTERSIGN_DATABASE_CONNECTION_WAIT": "2"])
        else {
            Issue.record("not PostgreSQL")
            return
        }
        #expect(set.connectionWait == .seconds(2) && set.queryLimit == .seconds(120))
        #expect(throws: ConfigurationError("invalid value \"0\" for --database-query-limit: expected whole seconds from 1 to 86400")) {
            try database(["--database": url, "--database-query-limit": "0"])
        }
    }

    @Test func thePasswordComesFromTheURLTheFileOrTheCredential() throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let file = folder.url.appendingPathComponent("database-password").path
        try Data("from-file\n".utf8).write(to: URL(fileURLWithPath: file))
        let credentials = folder.url.appendingPathComponent("credentials")
        try FileManager.default.createDirectory(at: credentials, withIntermediateDirectories: true)
        try Data("from-credential\n".utf8).write(to: credentials.appendingPathComponent("database-password"))
        let url = "postgres://countersign@db.internal:6432/auth?sslmode=verify-full"

        guard case .postgres(let fromFile) = try database(["--database": url, "--database-password-file": file]) else {
            Issue.record("not PostgreSQL")
            return
        }
        #expect(fromFile.password == "from-file")
        #expect(fromFile.host == "db.internal" && fromFile.port == 6432 && fromFile.database == "auth" && fromFile.sslMode == .verifyFull)
        guard case .postgres(let fromCredential) = try database(["--database": url], environment: ["CREDENTIALS_DIRECTORY": credentials.path])
        else {
            Issue.record("not PostgreSQL")
            return
        }
        #expect(fromCredential.password == "from-credential")
        let inURL = try database(
            ["--database": "postgresql://countersign:s3cr%40t@db.internal/auth", "--database-password-file": file])
        guard case .postgres(let settings) = inURL else {
            Issue.record("not PostgreSQL")
            return
        }
        #expect(settings.password == "s3cr@t" && settings.sslMode == .prefer && settings.port == 5432)
        #expect(settings.connectTimeout == .seconds(5))
        guard case .postgres(let patient) = try database(["--database": "postgres://countersign@db.internal/auth?connect_timeout=20"]) else {
            Issue.record("not PostgreSQL")
            return
        }
        #expect(patient.connectTimeout == .seconds(20))
        // What logs and the start-up line show: never the password.
        #expect(inURL.display == "postgres://countersign@db.internal:5432/auth?sslmode=prefer")
        #expect(
            try ConfigurationLoader(flags: ["--database": "postgres://u:pw@h/d"], environment: [:], configFile: nil).serveConfiguration()
                .startupSummary["database"]?.description.contains("pw") == false)
        #expect(try database(["--database": "/var/lib/countersign/countersign.sqlite"]) == .sqlite(path: "/var/lib/countersign/countersign.sqlite"))
    }

    @Test func aURLThatCannotWorkIsRefusedInOneLine() throws {
        for (url, reason) in [
            ("postgres://countersign@db.internal/auth?sslmode=allow", "sslmode must be one of"),
            ("postgres://countersign@db.internal/auth?host=/run/postgresql", "unknown URL parameter host"),
            ("postgres://db.internal/auth", "names no user"),
            ("postgres://countersign@db.internal", "names no database"),
            ("postgres://countersign@db.internal/auth?sslmode=require&sslrootcert=/etc/ca.pem", "only with sslmode=verify-full"),
            ("postgres://countersign@db.internal/auth?sslmode=verify-full&sslrootcert=ca.pem", "absolute path"),
            ("postgres://countersign@db.internal/auth?connect_timeout=0", "connect_timeout must be 1 to 600 seconds"),
            ("postgres://countersign@db.internal/auth?connect_timeout=5s", "connect_timeout must be 1 to 600 seconds"),
        ] {
            do {
                _ = try database(["--database": url])
                Issue.record("\(url) was accepted")
            } catch let error as ConfigurationError {
                #expect(error.description.contains(reason), "\(error.description)")
                #expect(!error.description.contains("\n"))
            }
        }
        #expect(throws: ConfigurationError.self) {
            try database(["--database": "postgres://countersign@db.internal/auth", "--database-password-file": "/nonexistent/password"])
        }
    }
}

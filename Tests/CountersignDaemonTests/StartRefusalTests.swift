import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// What stops `serve` before it runs, with one line and exit 78: an address it
/// cannot listen on (before the database is opened: nothing is created or
/// migrated), and a database a newer release migrated.
@Suite struct StartRefusalTests {
    /// A socket listening on 127.0.0.1 at a port the kernel chose; closed by the caller.
    static func listening() throws -> (descriptor: Int32, port: Int) {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let ready = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, length) == 0 && listen(descriptor, 8) == 0 && getsockname(descriptor, $0, &length) == 0
            }
        }
        guard ready else { throw RunError("cannot listen: \(String(cString: strerror(errno)))") }
        return (descriptor, Int(UInt16(bigEndian: address.sin_port)))
    }

    /// A port another socket holds, and a database path in a folder of its own that a refused start must leave untouched.
    static func withABusyPort(_ body: (_ port: Int, _ database: String, _ folder: URL) async throws -> Void) async throws {
        let folder = try makeTemporaryFolder("countersign-listen")
        defer { try? FileManager.default.removeItem(at: folder) }
        let (descriptor, port) = try listening()
        defer { close(descriptor) }
        try await body(port, folder.appendingPathComponent("countersign.sqlite").path, folder)
    }

    @Test func anAddressInUseStopsTheStartBeforeTheDatabaseIsTouched() async throws {
        try await Self.withABusyPort { port, database, folder in
            let (status, output) = try await DaemonProcessTests.command([
                "serve", "--database", database, "--listen", "127.0.0.1:\(port)", "--metrics-listen", "off",
            ])
            #expect(status == 78, "\(output)")
            #expect(output.contains("cannot listen on 127.0.0.1:\(port) (--listen): Address already in use"), "\(output)")
            #expect(!output.contains("errno"))
            #expect(!FileManager.default.fileExists(atPath: database))
            #expect(!FileManager.default.fileExists(atPath: folder.appendingPathComponent("countersign.key").path))

            // The metrics listener is checked the same way.
            let (metrics, metricsOutput) = try await DaemonProcessTests.command([
                "serve", "--database", database, "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:\(port)",
            ])
            #expect(metrics == 78, "\(metricsOutput)")
            #expect(metricsOutput.contains("(--metrics-listen): Address already in use"), "\(metricsOutput)")
            #expect(!FileManager.default.fileExists(atPath: database))
        }
    }

    /// With `--log-format json` the refusal is one JSON object, as every other line a log collector reads from the daemon.
    @Test func withLogFormatJSONARefusalIsOneObject() async throws {
        try await Self.withABusyPort { port, database, _ in
            let (status, output) = try await DaemonProcessTests.command([
                "serve", "--database", database, "--listen", "127.0.0.1:\(port)", "--metrics-listen", "off", "--log-format", "json",
            ])
            #expect(status == 78, "\(output)")
            let lines = output.split(separator: "\n")
            #expect(lines.count == 1, "\(output)")
            let object = try #require(try JSONSerialization.jsonObject(with: Data((lines.first ?? "").utf8)) as? [String: String])
            #expect(object["level"] == "error")
            #expect(object["message"]?.contains("cannot listen on 127.0.0.1:\(port) (--listen): Address already in use") == true, "\(object)")
            #expect(object["time"] != nil)
            #expect(!FileManager.default.fileExists(atPath: database))

            // A bad setting too, whether the format came from the flag or the environment.
            let (bad, badOutput) = try await DaemonProcessTests.command(
                ["serve", "--database", database, "--request-ttl", "0"], environment: ["COUNTERSIGN_LOG_FORMAT": "json"])
            #expect(bad == 78, "\(badOutput)")
            let refusal = try #require(
                try JSONSerialization.jsonObject(with: Data(badOutput.trimmingCharacters(in: .whitespacesAndNewlines).utf8)) as? [String: String])
            #expect(refusal["message"]?.contains("--request-ttl") == true, "\(refusal)")
        }
    }

    @Test func aDatabaseANewerReleaseMigratedIsRefused() async throws {
        let folder = try makeTemporaryFolder("countersign-newer")
        defer { try? FileManager.default.removeItem(at: folder) }
        let database = folder.appendingPathComponent("countersign.sqlite").path
        let added = try await DeviceSimulateTests.run(
            ["user", "add", "ana@example.com", "--database", database, "--bcrypt-cost", "4"], input: "correct horse battery\n")
        #expect(added.status == 0, "\(added.output)")
        // `migrate --status`: every migration this release knows is applied, none pending.
        let fresh = try await DaemonProcessTests.command(["migrate", "--status", "--database", database])
        #expect(fresh.status == 0, "\(fresh.output)")
        #expect(fresh.output.contains("applied  v1-accounts-and-approvals") && fresh.output.contains("applied  v10-push-providers"))
        #expect(!fresh.output.contains("pending"))
        // A newer release's migration, as GRDB records it.
        let script =
            "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute(\"INSERT INTO grdb_migrations VALUES ('v99-from-the-future')\"); c.commit()"
        let (inserted, said) = try await onOwnThread { try runToEnd("/usr/bin/env", ["python3", "-c", script, database]) }
        #expect(inserted == 0, "\(said)")
        let (status, output) = try await DaemonProcessTests.command([
            "serve", "--database", database, "--listen", "127.0.0.1:0", "--metrics-listen", "off",
        ])
        #expect(status == 78, "\(output)")
        #expect(output.contains("migrated by a newer release of Countersign (v99-from-the-future)"), "\(output)")
        #expect(output.contains("up to v13-webhook-self-service"), "\(output)")
        let newer = try await DaemonProcessTests.command(["migrate", "--status", "--database", database])
        #expect(newer.status == 78, "\(newer.output)")
        // A backup reads it as it is: the source is neither refused nor migrated by the binary that copies it.
        let copy = folder.appendingPathComponent("copy.sqlite").path
        let key = folder.appendingPathComponent("countersign.key")
        try Data((0..<32).map { _ in UInt8.random(in: 0...255) }).write(to: key)
        let backup = try await DaemonProcessTests.command(["backup", "--to", copy, "--database", database, "--secret-key-file", key.path])
        #expect(backup.status == 0, "\(backup.output)")
        let copied = try await DaemonProcessTests.command(["migrate", "--status", "--database", copy])
        #expect(copied.output.contains("unknown  v99-from-the-future"), "\(copied.output)")
        #expect(newer.output.contains("unknown  v99-from-the-future  (from a newer release)"), "\(newer.output)")
    }
}

/// The command line an operator meets first: the release it is, and help rather than a daemon when no command is given.
@Suite struct CommandLineBasicsTests {
    @Test func versionAndABareCommandPrintWithoutStartingAnything() async throws {
        let folder = try makeTemporaryFolder("countersign-bare")
        defer { try? FileManager.default.removeItem(at: folder) }
        let (status, output) = try await DaemonProcessTests.command(["--version"])
        #expect(status == 0)
        #expect(output.trimmingCharacters(in: .whitespacesAndNewlines).firstMatch(of: /^[0-9]+\.[0-9]+\.[0-9]+$/) != nil, "\(output)")
        // Run in an empty folder: help, and no database or key left there.
        let (bare, help) = try await onOwnThread {
            try runToEnd("/bin/sh", ["-c", "cd \"$0\" && exec \"$1\"", folder.path, DaemonProcessTests.binary.path])
        }
        #expect(bare == 0, "\(help)")
        #expect(help.contains("SUBCOMMANDS:") && help.contains("serve"), "\(help)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder.path).isEmpty)
    }

    /// A command that cannot do what it was asked says so in one line and exits 1; a mistyped one shows usage and exits 64.
    @Test func aRuntimeFailureIsOneLineAndExitOneAndAMistypeIsUsage() async throws {
        let folder = try makeTemporaryFolder("countersign-cli")
        defer { try? FileManager.default.removeItem(at: folder) }
        let database = folder.appendingPathComponent("countersign.sqlite").path
        let added = try await DeviceSimulateTests.run(
            ["user", "add", "ana@example.com", "--database", database, "--bcrypt-cost", "4"], input: "correct horse battery\n")
        #expect(added.status == 0, "\(added.output)")
        for (arguments, input, said) in [
            (["device", "revoke", "no-such-device", "--database", database], "", "no device with id no-such-device"),
            (["user", "unlock", "nobody@example.com", "--database", database], "", "no user with email nobody@example.com"),
            (["user", "add", "bob@example.com", "--database", database, "--bcrypt-cost", "4"], "short\n", "password"),
            (["user", "add", "ana@example.com", "--database", database, "--bcrypt-cost", "4"], "correct horse battery\n", "already exists"),
        ] {
            let (status, output) = try await DeviceSimulateTests.run(arguments, input: input)
            #expect(status == 1, "\(arguments): \(output)")
            #expect(output.contains(said), "\(arguments): \(output)")
            #expect(!output.contains("USAGE") && !output.contains("Usage:"), "\(arguments): \(output)")
        }
        // A mistyped database path is an error naming it, not a new empty database.
        let typo = folder.appendingPathComponent("countersign.sqlite3").path
        let missing = try await DeviceSimulateTests.run(["user", "list", "--database", typo], input: "")
        #expect(missing.status == 1 && missing.output.contains("no database at \(typo)"), "\(missing.output)")
        #expect(!FileManager.default.fileExists(atPath: typo))
        let (mistyped, usage) = try await DeviceSimulateTests.run(["user", "unlock", "--no-such-option"], input: "")
        #expect(mistyped == 64, "\(usage)")
        // Every database command takes the daemon's config file, for its database among the rest.
        let config = folder.appendingPathComponent("countersign.json")
        try Data(#"{"database": "\#(database)", "bcryptCost": 4}"#.utf8).write(to: config)
        let listed = try await DeviceSimulateTests.run(["user", "list", "--config", config.path], input: "")
        #expect(listed.status == 0 && listed.output.contains("ana@example.com"), "\(listed.output)")
        let passwd = try await DeviceSimulateTests.run(
            ["user", "passwd", "ana@example.com", "--config", config.path], input: "staple orbit lantern\n")
        #expect(passwd.status == 0, "\(passwd.output)")
    }
}

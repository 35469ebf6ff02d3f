import Foundation
import NIOHTTP1
import TestSupport
import Testing

/// A database written by schema v10 (`Tests/Fixtures/schema-v10`, made by this
/// release: a user, two devices on APNs and Web Push, an integration, an
/// approved request and its audit trail), opened by the binary being tested:
/// every later release must still read it, row for row.
@Suite struct SchemaFixtureTests {
    static var fixture: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fixtures/schema-v10/countersign.sqlite")
    }

    @Test func aDatabaseOfSchemaV10IsReadRowForRow() async throws {
        try await MailDeliveryProcessTests.withFolder { folder in
            // A copy: the committed file is never written.
            let database = folder.appendingPathComponent("countersign.sqlite").path
            try FileManager.default.copyItem(atPath: Self.fixture.path, toPath: database)
            func run(_ arguments: [String]) async throws -> String {
                let (status, output) = try await DaemonProcessTests.command(arguments + ["--database", database])
                #expect(status == 0, "\(arguments): \(output)")
                return output
            }
            let status = try await run(["migrate", "--status"])
            #expect(status.contains("applied  v10-push-providers"), "\(status)")
            #expect(try await run(["user", "list"]).contains("ana@example.com"))
            let devices = try await run(["device", "list", "ana@example.com"])
            #expect(devices.contains("Fixture Pixel") && devices.contains("push webpush …ixture"), "\(devices)")
            #expect(devices.contains("Fixture iPhone") && devices.contains("push apns …ababab"), "\(devices)")
            #expect(try await run(["integration", "list"]).contains("Fixture Admin"))
            let trail = try await run(["audit", "--json"])
            #expect(trail.split(separator: "\n").count == 6, "\(trail)")
            #expect(trail.contains(#""kind":"approved""#), "\(trail)")
            // The daemon starts on it and answers.
            let daemon = try await RunningDaemon.start(["--database", database], log: folder.appendingPathComponent("daemon.log"))
            defer { daemon.stop() }
            let (health, _) = try await DaemonProcessTests.http(.GET, "\(daemon.base)/healthz")
            #expect(health == 200)
        }
    }

    /// trust.md, "a password ends ownership": before schema v11 a password given to an
    /// integration's user left it the integration's. Upgrading ends that ownership
    /// (audited) and voids the codes that integration issued for the user.
    @Test func upgradingEndsTheOwnershipOfUsersWhoHaveAPassword() async throws {
        try await MailDeliveryProcessTests.withFolder { folder in
            let database = folder.appendingPathComponent("countersign.sqlite").path
            try FileManager.default.copyItem(atPath: Self.fixture.path, toPath: database)
            // As v10 left it: ana, who has a password, still owned by the integration, with an unused code of its.
            let setup = """
                import sqlite3, sys
                c = sqlite3.connect(sys.argv[1])
                integration = c.execute("SELECT id FROM integrations").fetchone()[0]
                user = c.execute("SELECT id FROM users").fetchone()[0]
                c.execute("UPDATE users SET owner_integration_id = ?", (integration,))
                c.execute("INSERT INTO enrollments (code_hash, user_id, integration_id, created_at, expires_at) VALUES ('h', ?, ?, 0, 9e9)",
                    (user, integration))
                c.commit()
                """
            let (prepared, said) = try await onOwnThread { try runToEnd("/usr/bin/env", ["python3", "-c", setup, database]) }
            #expect(prepared == 0, "\(said)")
            let (listed, output) = try await DaemonProcessTests.command(["integration", "list", "--database", database])
            #expect(listed == 0, "\(output)")
            let check = """
                import sqlite3, sys
                c = sqlite3.connect(sys.argv[1])
                print(c.execute("SELECT owner_integration_id FROM users").fetchone()[0])
                print(c.execute("SELECT count(*) FROM enrollments").fetchone()[0])
                print(c.execute("SELECT detail FROM audit_events WHERE kind = 'ownership_ended'").fetchone()[0])
                """
            let (checked, rows) = try await onOwnThread { try runToEnd("/usr/bin/env", ["python3", "-c", check, database]) }
            #expect(checked == 0, "\(rows)")
            #expect(
                rows.split(separator: "\n").map(String.init)
                    == ["None", "0", "integration Fixture Admin; the user had a password before this version"], "\(rows)")
        }
    }
}

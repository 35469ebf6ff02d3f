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
}

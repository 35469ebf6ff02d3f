import Foundation
import TestSupport
import Testing

/// A value a command cannot take is refused as a mistyped option is: exit 64 and that command's own usage, before
/// anything is opened; a command that could not do what it was asked exits 1 with one line and no usage.
@Suite struct CommandUsageTests {
    @Test(arguments: [
        (["integration", "add", "bad/name"], "countersign integration add <name>"),
        (["integration", "add", "app", "--webhook-url", "http://example.com/hook"], "countersign integration add <name>"),
        (["integration", "set-webhook", "app", "ftp://example.com/hook"], "countersign integration set-webhook <integration>"),
        (["audit", "--since", "5x"], "countersign audit [--since <duration>]"),
        (["audit", "--kind", "no_such_kind"], "countersign audit [--since <duration>]"),
        (["user", "add", "not-an-address"], "countersign user add <email>"),
    ])
    func aValueACommandCannotTakeGetsThatCommandsUsage(arguments: [String], usage: String) async throws {
        let folder = try makeTemporaryFolder("countersign-usage")
        defer { try? FileManager.default.removeItem(at: folder) }
        let database = folder.appendingPathComponent("countersign.sqlite").path
        let (status, output) = try await DaemonProcessTests.command(arguments + ["--database", database])
        #expect(status == 64, "\(output)")
        #expect(output.contains("Usage: \(usage)"), "\(output)")
        // Refused before anything was opened: no database was made.
        #expect(!FileManager.default.fileExists(atPath: database))
    }

    @Test func aCommandThatCannotDoWhatItWasAskedExitsOneWithoutUsage() async throws {
        let folder = try makeTemporaryFolder("countersign-usage")
        defer { try? FileManager.default.removeItem(at: folder) }
        let database = folder.appendingPathComponent("countersign.sqlite").path
        #expect(try await DaemonProcessTests.command(["integration", "add", "app", "--database", database]).status == 0)
        let (status, output) = try await DaemonProcessTests.command(["integration", "rotate-key", "no-such-app", "--database", database])
        #expect(status == 1, "\(output)")
        #expect(!output.contains("Usage:"), "\(output)")
    }
}

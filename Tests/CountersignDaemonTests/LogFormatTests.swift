import Foundation
import TestSupport
import Testing

/// The daemon's log lines as collectors read them: journald priorities when
/// standard error is the journal, one JSON object a line with `--log-format json`.
@Suite struct LogFormatTests {
    @Test func underTheJournalLinesCarryTheirPriorityAndNoTimestamp() async throws {
        try await MailDeliveryProcessTests.withFolder { folder in
            let log = folder.appendingPathComponent("journal.log")
            _ = FileManager.default.createFile(atPath: log.path, contents: nil)
            // What systemd sets when it connects standard error to the journal: that file's device and inode.
            let attributes = try FileManager.default.attributesOfItem(atPath: log.path)
            let device = try #require(attributes[.systemNumber] as? NSNumber)
            let inode = try #require(attributes[.systemFileNumber] as? NSNumber)
            var environment = ProcessInfo.processInfo.environment
            environment["JOURNAL_STREAM"] = "\(device):\(inode)"
            let database = folder.appendingPathComponent("countersign.sqlite").path
            let daemon = try await RunningDaemon.start(["--database", database], log: log, environment: environment)
            defer { daemon.stop() }
            let lines = try String(contentsOf: log, encoding: .utf8).split(separator: "\n")
            #expect(lines.contains { $0.hasPrefix("<6>info countersign:") && $0.hasSuffix("] listening") }, "\(lines.prefix(5))")
            // Every line: a priority, the level; the journal keeps the time, so no line starts with one.
            #expect(
                lines.allSatisfy { $0.firstMatch(of: #/^<[2-7]>(trace|debug|info|notice|warning|error|critical) /#) != nil }, "\(lines.prefix(5))")
            // The secret key was created: notice, priority 5.
            #expect(lines.contains { $0.hasPrefix("<5>notice ") && $0.contains("secret key") }, "\(lines.prefix(8))")
        }
    }

    @Test func withLogFormatJSONEachLineIsAnObject() async throws {
        try await MailDeliveryProcessTests.withFolder { folder in
            let log = folder.appendingPathComponent("json.log")
            let database = folder.appendingPathComponent("countersign.sqlite").path
            let daemon = try await RunningDaemon.start(["--database", database, "--log-format", "json"], log: log)
            defer { daemon.stop() }
            let lines = try String(contentsOf: log, encoding: .utf8).split(separator: "\n")
            #expect(!lines.isEmpty)
            let objects = lines.compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: String] }
            #expect(objects.count == lines.count, "\(lines.prefix(3))")
            let listening = try #require(objects.first { $0["message"] == "listening" })
            #expect(listening["level"] == "info")
            #expect(listening["label"] == "countersign")
            #expect(listening["address"]?.contains("127.0.0.1") == true)
            #expect(listening["time"]?.hasPrefix("20") == true)
        }
    }
}

import Foundation
import TestSupport
import Testing

/// The README's quick start, as a newcomer copies it: each marked block runs
/// as written (with the built binary for `swift run countersign`, and this
/// test's daemon for the address) and ends with something approved.
@Suite struct QuickStartTests {
    /// The package's README, found from this file's place in the tree.
    static var readme: String {
        get throws {
            let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            return try String(contentsOf: root.appendingPathComponent("README.md"), encoding: .utf8)
        }
    }

    /// The shell block after `<!-- quick-start: NAME -->`.
    static func block(_ name: String) throws -> String {
        let text = try readme
        let marker = "<!-- quick-start: \(name) -->\n```sh\n"
        let start = try #require(text.range(of: marker), "no quick-start block \(name) in the README")
        let end = try #require(text.range(of: "```", range: start.upperBound..<text.endIndex))
        return String(text[start.upperBound..<end.lowerBound])
    }

    /// Runs `name`'s block in `folder` against `base`; its exit status and output.
    static func run(_ name: String, in folder: URL, base: String) async throws -> (status: Int32, output: String) {
        let script = try block(name)
            .replacingOccurrences(of: "swift run countersign", with: DaemonProcessTests.binary.path)
            .replacingOccurrences(of: "http://127.0.0.1:8080", with: base)
        #expect(!script.contains("8080"), "the block names the default address some other way")
        return try await onOwnThread {
            try runToEnd("/bin/bash", ["-euo", "pipefail", "-c", "cd '\(folder.path)'\n" + script], environment: ProcessInfo.processInfo.environment)
        }
    }

    @Test func theQuickStartsResetAndApprovalRunAsWritten() async throws {
        try await MailDeliveryProcessTests.withFolder { folder in
            // The daemon of `swift run countersign serve`, on the database the blocks' commands find by default.
            let daemon = try await RunningDaemon.start(
                ["--database", folder.appendingPathComponent("countersign.sqlite").path], log: folder.appendingPathComponent("daemon.log"))
            defer { daemon.stop() }

            let reset = try await Self.run("reset", in: folder, base: daemon.base)
            #expect(reset.status == 0, "\(reset.output)")
            #expect(reset.output.contains("approve → approved"), "\(reset.output)")
            #expect(reset.output.hasSuffix(#"{"success":true}"# + "\n"), "\(reset.output)")

            let approval = try await Self.run("approval", in: folder, base: daemon.base)
            #expect(approval.status == 0, "\(approval.output)")
            let last = try #require(approval.output.split(separator: "\n").last)
            let status = try #require(try JSONSerialization.jsonObject(with: Data(last.utf8)) as? [String: Any], "\(approval.output)")
            #expect(status["status"] as? String == "approved")
            #expect(status["via"] as? String == "push")
            #expect(status["deviceKeyBound"] as? Bool == true)
        }
    }
}

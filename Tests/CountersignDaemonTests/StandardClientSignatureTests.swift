import Foundation
import TestSupport
import Testing

/// trust.md, "Proofs are used once, everywhere": answers and proofs signed by
/// a library no one here wrote (PyJWT on cryptography's ECDSA, which, as
/// phones' keystores do, leaves `s` high about half the time) are all
/// accepted by the real binary. Our own signer once retried until `s` was low
/// and hid that half of all honest signatures were refused.
@Suite struct StandardClientSignatureTests {
    static let email = OfflineCodeProcessTests.email
    static let password = OfflineCodeProcessTests.password

    /// The repository's `scripts/standard-signer.py`.
    static var script: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("scripts/standard-signer.py").path
    }

    @Test func everyHonestSignatureOfAStandardLibraryIsAccepted() async throws {
        try await MailDeliveryProcessTests.withFolder { folder in
            // Room for 24 resets and 12 key changes in a minute; nothing else differs from the defaults.
            let limits = [
                "resetInitiatePerEmail=100/900", "resetInitiatePerIP=100/900", "respondPerDevice=100/60", "deviceKeyChangesPerDevice=100/3600",
            ].flatMap { ["--rate-limit", $0] }
            let (daemon, _) = try await OfflineCodeProcessTests.start(folder, extra: ["--bcrypt-cost", "4"] + limits)
            defer { daemon.stop() }

            let python = try await TestPython.path()
            let (status, output) = try await onOwnThread {
                try runToEnd(
                    python, [Self.script, daemon.base, Self.email, Self.password, "24", "12"],
                    environment: ProcessInfo.processInfo.environment)
            }
            #expect(status == 0, "\(output)")
            let line = try #require(output.split(separator: "\n").last, "\(output)")
            let results = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: [[any Sendable]]], "\(output)")
            let answers = try #require(results["answers"])
            let proofs = try #require(results["proofs"])
            #expect(answers.count == 24)
            #expect(proofs.count == 12)
            for (index, answer) in answers.enumerated() {
                #expect(answer[0] as? Int == 200, "answer \(index) (s high: \(answer[1])) was refused with \(answer[0])")
            }
            for (index, proof) in proofs.enumerated() {
                #expect(proof[0] as? Int == 200, "key change \(index) (s high: \(proof[1]), \(proof[2])) was refused with \(proof[0])")
            }
            // 60 random signatures: both forms occurred (all low would happen once in 2^60 runs).
            let highs = answers.filter { $0[1] as? Bool == true }.count + proofs.map { [$0[1], $0[2]] }.joined().filter { $0 as? Bool == true }.count
            #expect(highs > 0 && highs < 60, "\(highs) of 60 signatures had a high s")
        }
    }
}

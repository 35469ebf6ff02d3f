import FakeFCM
import Foundation
import TestSupport
import Testing

/// `countersign fcm check`, the real binary against a fake FCM on 127.0.0.1.
@Suite struct FCMCheckCommandTests {
    static func run(_ arguments: [String], environment: [String: String] = [:]) async throws -> (status: Int32, output: String) {
        try await DaemonProcessTests.command(arguments, environment: environment)
    }

    @Test func checkFetchesATokenAndValidatesAMessage() async throws {
        let folder = try makeTemporaryFolder("countersign-fcm")
        defer { try? FileManager.default.removeItem(at: folder) }
        let fake = try await FakeFCM()
        try await fake.serve { base in
            // Found through $CREDENTIALS_DIRECTORY, as under systemd.
            try fake.serviceAccountJSON(base: base).write(to: folder.appendingPathComponent("fcm-service-account.json"))
            let environment = ["CREDENTIALS_DIRECTORY": folder.path, "COUNTERSIGN_FCM_ENDPOINT": base]

            // The fake answers from this busy test process: 120 s is a hang detector, not a measure.
            let (status, output) = try await Self.run(
                ["fcm", "check", "--token", "device-token-123456", "--timeout", "120"], environment: environment)
            #expect(status == 0, "\(output)")
            #expect(output.contains("access token obtained"))
            #expect(output.contains("validate_only"))
            #expect(fake.exchanges == 1)
            #expect(fake.received.count == 1)
            #expect(fake.received.first?.validateOnly == true)
            #expect(fake.rejections.isEmpty)
            #expect(!output.contains("PRIVATE KEY"))

            fake.script("dead-token-654321", [.unregistered])
            let (failed, failure) = try await Self.run(
                ["fcm", "check", "--token", "dead-token-654321", "--timeout", "120"], environment: environment)
            #expect(failed != 0)
            #expect(failure.contains("unregistered"))

            let (refused, refusal) = try await Self.run(["fcm", "check", "--timeout", "0"], environment: environment)
            #expect(refused != 0)
            #expect(refusal.contains("--timeout must be 1 to 600 seconds"))
            #expect(fake.exchanges == 2)
        }
    }
}

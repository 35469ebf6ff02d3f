import CountersignDevice
import Foundation
import NIOHTTP1
import TestSupport
import Testing

/// `countersign backup`: a copy taken while the daemon serves holds what it
/// acknowledged, passes its integrity check, comes with the secret key, and a
/// daemon started on the restored pair finds every row.
@Suite struct BackupTests {
    @Test func aBackupTakenWhileServingRestoresWithItsKey() async throws {
        try await MailDeliveryProcessTests.withFolder { folder in
            let (daemon, database) = try await OfflineCodeProcessTests.start(folder)
            let phone = CountersignDevice(baseURL: daemon.base, store: MemoryKeyStore())
            try await phone.signIn(
                email: OfflineCodeProcessTests.email, password: OfflineCodeProcessTests.password, name: "Ana's phone", platform: "ios")
            let (id, number) = try await OfflineCodeProcessTests.initiate(daemon.base)
            #expect(try await phone.answer(id, .approve, numberCode: number) == "approved")

            // While the daemon serves.
            let copy = folder.appendingPathComponent("backup.sqlite").path
            let (status, output) = try await DaemonProcessTests.command(["backup", "--to", copy, "--database", database])
            #expect(status == 0, "\(output)")
            #expect(output.contains("integrity check: ok"))
            #expect(try TrustProcessTests.mode(copy) == 0o600)
            #expect(try TrustProcessTests.mode(copy + ".key") == 0o600)
            let key = folder.appendingPathComponent("countersign.key").path
            #expect(FileManager.default.contents(atPath: copy + ".key") == FileManager.default.contents(atPath: key))
            // Never over an existing backup.
            let (again, refused) = try await DaemonProcessTests.command(["backup", "--to", copy, "--database", database])
            #expect(again == 1 && refused.contains("exists already"), "\(refused)")
            daemon.stop()

            // Restored: a daemon on the copy and its key knows the approved request and completes it once.
            let restored = try await RunningDaemon.start(
                ["--database", copy, "--secret-key-file", copy + ".key"], log: folder.appendingPathComponent("restored.log"))
            defer { restored.stop() }
            #expect(try await OfflineCodeProcessTests.status(restored.base, id)["status"] as? String == "approved")
            let (completed, _) = try await DaemonProcessTests.http(.POST, "\(restored.base)/api/mobile/auth/reset/phone/complete/\(id)")
            #expect(completed == 200)
            let (twice, _) = try await DaemonProcessTests.http(.POST, "\(restored.base)/api/mobile/auth/reset/phone/complete/\(id)")
            #expect(twice != 200)
        }
    }
}

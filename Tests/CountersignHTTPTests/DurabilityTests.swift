import CountersignCore
import CountersignHTTP
import CountersignRuntime
import CountersignStore
import Foundation
import Logging
import NIOHTTP1
import TestSupport
import Testing

@testable import DaemonTestSupport

@Suite struct DurabilityTests {
    @Test func anApprovalSurvivesARestartAndCanBeCompleted() async throws {
        try await withTemporaryFolder { folder in
            let configuration = TestDaemon.configuration(folder)
            let (id, key) = try await TestDaemon.run(configuration) { daemon in
                try await daemon.createUser(Fixture.email, password: Fixture.password)
                let (key, _) = try await daemon.login(Fixture.email, password: Fixture.password)
                let (id, code) = try await daemon.initiate(Fixture.email, newPassword: Fixture.newPassword)
                #expect(try await daemon.respond(id, apiKey: key, code: code).status == 200)
                return (id, key)
            }
            try await TestDaemon.run(configuration) { daemon in
                let status = try await daemon.status(id)
                #expect(status["status"] == "approved")
                #expect(try await daemon.call(.GET, "/api/mobile/approvals/pending", apiKey: key).status == 200)
                #expect(try await daemon.complete(id).status == 200)
                let old = try await daemon.call(
                    .POST, "/api/mobile/auth/login",
                    json: ["email": Fixture.email, "password": Fixture.password, "deviceName": "d", "platform": "iOS"])
                #expect(old.status == 401)
                _ = try await daemon.login(Fixture.email, password: Fixture.newPassword)
            }
        }
    }

    @Test func aPendingRequestOverdueAtStartIsExpiredOnLoad() async throws {
        try await withTemporaryFolder { folder in
            let clock = ManualClock()
            let id = try await TestDaemon.run(TestDaemon.configuration(folder), clock: clock) { daemon in
                try await daemon.createUser(Fixture.email, password: Fixture.password)
                return try await daemon.initiate(Fixture.email, newPassword: Fixture.newPassword).requestID
            }
            // Still pending in the file: the daemon stopped before the deadline.
            let file = try SQLiteStore(path: folder.databasePath, logger: Logger(label: "test"))
            #expect(try await file.request(id: id)?.state == .pending)
            try file.close()
            // Its 60 s pass while no daemon runs.
            clock.advance(61)
            try await TestDaemon.run(TestDaemon.configuration(folder), clock: clock) { daemon in
                let stored = try await daemon.server.store.request(id: id)
                #expect(stored?.state == .expired)
                #expect(try await daemon.status(id)["status"] == "expired")
            }
        }
    }

    @Test func noSecretReachesTheDatabaseFileOrTheLogs() async throws {
        try await withTemporaryFolder { folder in
            let logs = LogCapture()
            let configuration = TestDaemon.configuration(folder) { $0.logLevel = .trace }
            let secrets = try await TestDaemon.run(configuration, logs: logs) { daemon in
                let password = "Original-Pa55word-\(UUID().uuidString.prefix(8))"
                let newPassword = "Brand-New-Pa55word-\(UUID().uuidString.prefix(8))"
                try await daemon.createUser(Fixture.email, password: password)
                let (key, _) = try await daemon.login(Fixture.email, password: password, fcmToken: "fcm-token-0123456789-abcdef")
                let (id, code) = try await daemon.initiate(Fixture.email, newPassword: newPassword)
                // The status route, plain and long-polled, whose path holds the id.
                #expect(try await daemon.status(id).status == 200)
                #expect(try await daemon.status(id, wait: 1)["status"] == "pending")
                #expect(try await daemon.respond(id, apiKey: key, code: code).status == 200)
                #expect(try await daemon.complete(id).status == 200)
                let refreshed = try await daemon.call(.POST, "/api/mobile/auth/refresh-key", json: ["password": newPassword], apiKey: key)
                let newKey = try #require(refreshed["apiKey"])
                return [password, newPassword, key, newKey, id]
            }
            var bytes = Data()
            for suffix in ["", "-wal", "-shm"] {
                bytes.append(FileManager.default.contents(atPath: folder.databasePath + suffix) ?? Data())
            }
            #expect(bytes.count > 0)
            let logText = logs.text
            #expect(!logText.isEmpty)
            for secret in secrets.dropLast() {
                #expect(bytes.range(of: Data(secret.utf8)) == nil, "a secret is in the database file")
                #expect(!logText.contains(secret), "a secret is in the logs")
            }
            // The request id is a credential too: stored (it is the key), never logged.
            #expect(!logText.contains(secrets.last!))
            #expect(!logText.contains("fcm-token-0123456789"))
        }
    }
}

import CountersignCore
import CountersignRuntime
import CountersignStore
import Foundation
import Logging
import TestSupport
import Testing

@testable import DaemonTestSupport

/// trust.md: every password check costs what the costliest stored hash
/// costs, and a login brings a hash of another cost to the configured one.
@Suite struct PasswordCostTests {
    @Test func checksCostTheCostliestStoredHashAndALoginRehashesAtTheConfiguredCost() async throws {
        try await withTemporaryFolder { folder in
            // setup: a user whose hash was made at cost 6, before the daemon was set to cost 4.
            let store = try SQLiteStore(path: folder.databasePath, logger: Logger(label: "test"))
            let old = try await BcryptPasswordHasher(cost: 6).hash(Fixture.password)
            let user = try await store.createUser(email: Fixture.email, passwordHash: old)
            try store.close()
            let logs = LogCapture()
            try await TestDaemon.run(TestDaemon.configuration(folder), logs: logs) { daemon in
                // check: unknown emails (the decoy) and every padded check cost 6, not the configured 4.
                #expect(logs.text.contains("password checks cost 6"), "\(logs.text.prefix(2000))")

                // act: she logs in; her hash is made again at cost 4, and still opens her account.
                _ = try await daemon.login(Fixture.email, password: Fixture.password)
                let stored = try #require(try await daemon.server.store.user(id: user.id)?.passwordHash)
                #expect(BcryptPasswordHasher.cost(of: stored) == 4)
                #expect(stored != old)
                #expect(try await daemon.canLogIn(Fixture.email, password: Fixture.password))
            }
            // The next start has no dearer hash left.
            let again = LogCapture()
            try await TestDaemon.run(TestDaemon.configuration(folder), logs: again) { _ in
                #expect(again.text.contains("password checks cost 4"))
            }
        }
    }
}

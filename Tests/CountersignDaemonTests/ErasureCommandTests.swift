import CountersignCore
import CountersignStore
import Foundation
import Logging
import TestSupport
import Testing

/// What an operator answers to an erasure request: `user delete` erases, `audit --email` with the
/// same secret key still finds the erased user's events by their pseudonym; `integration delete`.
@Suite struct ErasureCommandTests {
    func object(_ line: some StringProtocol) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], "\(line)")
    }

    @Test func anOperatorErasesAUserAndStillFindsTheirEventsWithTheKey() async throws {
        let folder = try makeTemporaryFolder("countersign-erasure")
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appendingPathComponent("countersign.sqlite").path
        let key = folder.appendingPathComponent("secret.key").path
        try Data((0..<32).map { _ in UInt8.random(in: 0...255) }).write(to: URL(fileURLWithPath: key))
        let database = ["--database", path]

        let added = try await DaemonProcessTests.command(["integration", "add", "app", "--json"] + database)
        #expect(added.status == 0, "\(added.output)")
        let integrationID = try #require(try object(added.output.trimmingCharacters(in: .newlines))["id"] as? String)
        let store = try SQLiteStore(path: path, logger: Logger(label: "test"))
        let (ana, _) = try await store.ensureUser(email: "ana@example.com", integrationID: integrationID)
        try await store.append([AuditEvent(kind: .userCreated, userID: ana.id, email: ana.email, detail: "integration app")])

        // Without the key nothing is erased: the pseudonym needs it.
        let keyless = try await DaemonProcessTests.command(["user", "delete", "ana@example.com"] + database)
        #expect(keyless.status != 0 && keyless.output.contains("no secret key"), "\(keyless.output)")
        #expect(try await store.user(email: "ana@example.com") != nil)

        let deleted = try await DaemonProcessTests.command(["user", "delete", "ana@example.com", "--secret-key-file", key, "--json"] + database)
        #expect(deleted.status == 0, "\(deleted.output)")
        let erased = try object(deleted.output.trimmingCharacters(in: .newlines))
        let pseudonym = try #require(erased["pseudonym"] as? String)
        #expect(pseudonym.hasPrefix("erased-") && erased["auditEvents"] as? Int == 1)
        #expect(try await store.user(email: "ana@example.com") == nil)
        let again = try await DaemonProcessTests.command(["user", "delete", "ana@example.com", "--secret-key-file", key] + database)
        #expect(again.status == 1 && again.output.contains("no user with email ana@example.com"), "\(again.output)")

        // The operator, holding the key, finds her events by her email; they carry the pseudonym, never the email.
        let found = try await DaemonProcessTests.command(["audit", "--email", "ana@example.com", "--secret-key-file", key, "--json"] + database)
        #expect(found.status == 0, "\(found.output)")
        let lines = try found.output.split(separator: "\n").map(object)
        #expect(Set(lines.compactMap { $0["kind"] as? String }) == ["user_created", "user_erased"], "\(found.output)")
        #expect(lines.allSatisfy { $0["email"] as? String == pseudonym })
        #expect(!found.output.contains("ana@example.com"))
        // Another key finds nothing.
        let otherKey = folder.appendingPathComponent("other.key").path
        try Data((0..<32).map { _ in UInt8.random(in: 0...255) }).write(to: URL(fileURLWithPath: otherKey))
        let other = try await DaemonProcessTests.command(["audit", "--email", "ana@example.com", "--secret-key-file", otherKey, "--json"] + database)
        #expect(other.output.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty, "\(other.output)")

        let removed = try await DaemonProcessTests.command(["integration", "delete", "app", "--json"] + database)
        #expect(removed.status == 0, "\(removed.output)")
        #expect(try object(removed.output.trimmingCharacters(in: .newlines))["name"] as? String == "app")
        #expect(try await store.integration(id: integrationID) == nil)
        let listed = try await DaemonProcessTests.command(["integration", "list", "--json"] + database)
        #expect(listed.status == 0 && listed.output.isEmpty, "\(listed.output)")
    }
}

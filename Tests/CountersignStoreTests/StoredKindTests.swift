import CountersignCore
import CountersignSQL
import Foundation
import GRDB
import Logging
import TestSupport
import Testing

@testable import CountersignStore

/// A value of another kind than its column's model (a damaged or hand-edited file) is refused naming
/// the column and the kinds, on the copied rows of a lookup and the streamed rows of a restart's load,
/// and the refusal holds nothing of the row: no password hash, no other value.
@Suite final class StoredKindTests: Sendable {
    let folder: URL

    init() throws { folder = try makeTemporaryFolder("countersign-kinds") }
    deinit { try? FileManager.default.removeItem(at: folder) }

    @Test func aValueOfTheWrongKindIsNamedByItsColumnWithoutTheRow() async throws {
        let store = try SQLiteStore(path: folder.appendingPathComponent("kinds.sqlite").path, logger: Logger(label: "test"))
        defer { try? store.close() }
        let secretHash = "$2b$12$secret-hash-that-must-not-leak"
        let user = try await store.createUser(email: "ana@example.com", passwordHash: secretHash)
        try await store.pool.write { db in
            // A blob stays a blob in a TEXT column, text stays text in a REAL one (SQLite's affinity converts neither).
            try db.execute(sql: "UPDATE users SET email = X'0102' WHERE id = ?", arguments: [user.id])
        }
        do {
            _ = try await store.user(id: user.id)
            Issue.record("a blob was read as an email")
        } catch let error as SQLDecodingError {
            #expect(error.description == "column email: expected text, found a blob")
            #expect(!"\(error)".contains("secret-hash"))
        }

        let request = ApprovalRequest(
            id: "r1", userID: user.id, subject: user.id, action: .passwordReset, state: .pending, createdAt: Date(),
            expiresAt: Date().addingTimeInterval(60), completionWindow: 120, updatedAt: Date(), numberCode: NumberCode.seal("47"),
            newPasswordHash: secretHash, requester: RequesterInfo(ip: "127.0.0.1", userAgent: nil))
        _ = try await store.insert(request, idempotency: nil, supersededEvent: { _ in nil })
        try await store.pool.write { db in try db.execute(sql: "UPDATE approval_requests SET expires_at = 'soon' WHERE id = 'r1'") }
        // A restart's load reads row by row from the statement: the same check, not a silent 0 (1970).
        do {
            _ = try await store.liveRequests()
            Issue.record("text was read as a time")
        } catch let error as SQLDecodingError {
            #expect(error.description == "column expires_at: expected a real number, found text")
            #expect(!"\(error)".contains("secret-hash"))
        }
    }

    /// Columns are found by the positions their statement gives them, once per result: each read
    /// gets its own column's value on copied and streamed rows, the first of two that share a name,
    /// a name in another case as GRDB finds it, and a missing one named. A row whose first column
    /// is NULL is a row like any other (the statement is stepped without reading it).
    @Test func columnsAreReadByTheirStatementsPositions() async throws {
        let store = try SQLiteStore(path: folder.appendingPathComponent("columns.sqlite").path, logger: Logger(label: "test"))
        defer { try? store.close() }
        let query: SQLStatement = "SELECT 'first' AS name, 2 AS n, 'second' AS name, 2.5 AS r UNION ALL SELECT 'third', 4, 'fourth', NULL"
        let nullFirst: SQLStatement = "SELECT NULL AS a, 1 AS b UNION ALL SELECT NULL, 2"
        let (nulls, nullsStreamed) = try await store.pool.read { db in
            var streamed: [Int64?] = []
            try db.forEach(nullFirst) { row in streamed.append(try row.integer("b")) }
            return (try db.fetch(nullFirst).map { try $0.integer("b") }, streamed)
        }
        #expect(nulls == [1, 2] && nullsStreamed == [1, 2])
        let (copied, streamed, missing) = try await store.pool.read { db in
            var streamed: [[String?]] = []
            try db.forEach(query) { row in streamed.append([try row.string("name"), try row.string("NAME"), try row.real("r").map { "\($0)" }]) }
            let rows = try db.fetch(query)
            let copied = try rows.map { [try $0.get("name", as: String.self), "\(try $0.get("N", as: Int.self))", try $0.real("r").map { "\($0)" }] }
            return (copied, streamed, #expect(throws: SQLMissingColumn.self) { try rows[0].string("email") })
        }
        #expect(copied == [["first", "2", "2.5"], ["third", "4", nil]])
        #expect(streamed == [["first", "first", "2.5"], ["third", "third", nil]])
        #expect(missing?.column == "email")
    }
}

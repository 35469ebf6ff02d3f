import CountersignCore
import CountersignSQL
import Foundation
import Testing

@Suite struct SQLStatementTests {
    /// Values are bound, never spliced into the text: each store numbers them its own way.
    @Test func interpolatedValuesBecomePlaceholdersInOrder() {
        let name = "x'); DROP TABLE users; --"
        let missing: String? = nil
        let statement: SQLStatement = "UPDATE devices SET name = \(name), fcm_token = \(missing) WHERE id = \(42) AND push_enabled = \(true)"
        #expect(statement.questionMarked == "UPDATE devices SET name = ?, fcm_token = ? WHERE id = ? AND push_enabled = ?")
        #expect(statement.numbered == "UPDATE devices SET name = $1, fcm_token = $2 WHERE id = $3 AND push_enabled = $4")
        #expect(statement.arguments == [.text(name), .null, .integer(42), .bool(true)])
        #expect(!statement.numbered.contains("DROP"))
    }

    @Test func aLockIsAddedAfterTheBoundValues() {
        let statement = AccountSQL.deviceOwner(deviceID: "d1").appending(" FOR UPDATE")
        #expect(statement.numbered == "SELECT user_id FROM devices WHERE id = $1 FOR UPDATE")
        #expect(statement.arguments == [.text("d1")])
    }

    @Test func timesAreBoundAsUnixSeconds() {
        let statement = AccountSQL.seen(deviceID: "d1", at: Date(timeIntervalSince1970: 1_700_000_000.5))
        #expect(statement.arguments == [.real(1_700_000_000.5), .text("d1")])
    }
}

@Suite struct SQLRowTests {
    struct Row: SQLRow {
        var columns: [String: SQLValue]
        func value(_ column: String) throws -> SQLValue {
            guard let value = columns[column] else { throw SQLMissingColumn(column: column) }
            return value
        }
    }

    /// SQLite gives booleans as 0/1 and may give a whole REAL as an integer; PostgreSQL gives booleans and doubles.
    @Test func oneDecoderReadsEitherStoresColumns() throws {
        let sqlite = Row(columns: [
            "id": .text("u1"), "email": .text("a@example.com"), "password_hash": .text("$2b$10$abc"), "created_at": .integer(1_700_000_000),
            "silenced_until": .null,
        ])
        let postgres = Row(columns: [
            "id": .text("u1"), "email": .text("a@example.com"), "password_hash": .text("$2b$10$abc"), "created_at": .real(1_700_000_000),
            "silenced_until": .null,
        ])
        let fromSQLite = try User(row: sqlite)
        let fromPostgres = try User(row: postgres)
        #expect(fromSQLite.createdAt == Date(timeIntervalSince1970: 1_700_000_000))
        #expect(fromSQLite.createdAt == fromPostgres.createdAt)
        #expect(fromSQLite.silencedUntil == nil)
        #expect(try Row(columns: ["b": .integer(1)]).get("b", as: Bool.self))
        #expect(try !Row(columns: ["b": .bool(false)]).get("b", as: Bool.self))
    }

    /// A column of the wrong kind names the column and the kind, never the value (it may be a hash or a secret).
    @Test func aWrongColumnIsNamedWithoutItsValue() {
        let row = Row(columns: ["password_hash": .integer(7), "api_key_hash": .text("secret-hash")])
        #expect(throws: SQLDecodingError.self) { try row.get("password_hash", as: String.self) }
        do {
            _ = try row.get("api_key_hash", as: Int.self)
            Issue.record("text decoded as an integer")
        } catch let error as SQLDecodingError {
            #expect(error.description == "column api_key_hash: expected Int, found text")
        } catch {
            Issue.record("unexpected \(error)")
        }
        #expect(throws: SQLMissingColumn.self) { try row.get("nothing", as: String?.self) }
        #expect(User.passwordHashCost(prefix: "$2b$12$") == 12)
    }
}

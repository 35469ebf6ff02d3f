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
    /// A row as a store hands it over: SQLite gives booleans as 0/1 and may give a whole REAL as an integer;
    /// PostgreSQL gives booleans and doubles.
    struct Row: SQLRow {
        struct WrongKind: Error {}
        var columns: [String: SQLValue]

        func column(_ name: String) throws -> SQLValue {
            guard let value = columns[name] else { throw SQLMissingColumn(column: name) }
            return value
        }
        func string(_ name: String) throws -> String? {
            switch try column(name) {
            case .null: nil
            case .text(let text): text
            default: throw WrongKind()
            }
        }
        func integer(_ name: String) throws -> Int64? {
            switch try column(name) {
            case .null: nil
            case .integer(let number): number
            default: throw WrongKind()
            }
        }
        func real(_ name: String) throws -> Double? {
            switch try column(name) {
            case .null: nil
            case .real(let number): number
            case .integer(let number): Double(number)
            default: throw WrongKind()
            }
        }
        func bool(_ name: String) throws -> Bool? {
            switch try column(name) {
            case .null: nil
            case .bool(let flag): flag
            case .integer(let number): number != 0
            default: throw WrongKind()
            }
        }
        func blob(_ name: String) throws -> Data? {
            switch try column(name) {
            case .null: nil
            case .blob(let data): data
            default: throw WrongKind()
            }
        }
    }

    @Test func oneDecoderReadsEitherStoresColumns() throws {
        let sqlite = Row(columns: [
            "id": .text("u1"), "email": .text("a@example.com"), "password_hash": .text("$2b$10$abc"), "created_at": .integer(1_700_000_000),
            "silenced_until": .null, "owner_integration_id": .null,
        ])
        let postgres = Row(columns: [
            "id": .text("u1"), "email": .text("a@example.com"), "password_hash": .text("$2b$10$abc"), "created_at": .real(1_700_000_000),
            "silenced_until": .real(1_700_000_060), "owner_integration_id": .text("int_1"),
        ])
        let fromSQLite = try User(row: sqlite)
        let fromPostgres = try User(row: postgres)
        #expect(fromSQLite.createdAt == Date(timeIntervalSince1970: 1_700_000_000))
        #expect(fromSQLite.createdAt == fromPostgres.createdAt)
        #expect(fromSQLite.silencedUntil == nil)
        #expect(fromPostgres.silencedUntil == Date(timeIntervalSince1970: 1_700_000_060))
        #expect(fromSQLite.ownerIntegrationID == nil && fromPostgres.ownerIntegrationID == "int_1")
        #expect(try Row(columns: ["b": .integer(1)]).get("b", as: Bool.self))
        #expect(try !Row(columns: ["b": .bool(false)]).get("b", as: Bool.self))
    }

    /// A NULL where the model needs a value names the column, and no value (a row may hold a hash or a secret).
    @Test func aMissingValueIsNamedByItsColumn() throws {
        let row = Row(columns: ["password_hash": .null, "api_key_hash": .text("secret-hash")])
        do {
            _ = try row.get("password_hash", as: String.self)
            Issue.record("NULL decoded as a string")
        } catch let error as SQLDecodingError {
            #expect(error.description == "column password_hash: expected String, found NULL")
        } catch {
            Issue.record("unexpected \(error)")
        }
        #expect(try row.get("password_hash", as: String?.self) == nil)
        #expect(throws: SQLMissingColumn.self) { try row.get("nothing", as: String?.self) }
        #expect(User.passwordHashCost(prefix: "$2b$12$") == 12)
    }
}

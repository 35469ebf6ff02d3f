import CountersignSQL
import Foundation
import GRDB

// The shared statements (CountersignSQL) as GRDB runs them: `?` placeholders, cached statements.

extension SQLValue {
    var databaseValue: DatabaseValue {
        switch self {
        case .null: .null
        case .integer(let number): number.databaseValue
        case .real(let number): number.databaseValue
        case .text(let text): text.databaseValue
        case .blob(let data): data.databaseValue
        case .bool(let flag): flag.databaseValue
        }
    }
}

extension Database {
    func prepared(_ statement: SQLStatement) throws -> (Statement, StatementArguments) {
        (try cachedStatement(sql: statement.questionMarked), StatementArguments(statement.arguments.map(\.databaseValue)))
    }

    func fetch(_ statement: SQLStatement) throws -> [Row] {
        let (prepared, arguments) = try prepared(statement)
        return try Row.fetchAll(prepared, arguments: arguments)
    }

    func fetchFirst(_ statement: SQLStatement) throws -> Row? {
        let (prepared, arguments) = try prepared(statement)
        return try Row.fetchOne(prepared, arguments: arguments)
    }

    /// Runs a write; returns how many rows it changed (its `RETURNING` rows are not read).
    @discardableResult
    func perform(_ statement: SQLStatement) throws -> Int {
        let (prepared, arguments) = try prepared(statement)
        try prepared.execute(arguments: arguments)
        return changesCount
    }

    /// Whether a query returns any row.
    func exists(_ statement: SQLStatement) throws -> Bool { try fetchFirst(statement) != nil }
}

extension Row: SQLRow {
    public func value(_ column: String) throws -> SQLValue {
        guard let value: DatabaseValue = self[column] else { throw SQLMissingColumn(column: column) }
        return switch value.storage {
        case .null: .null
        case .int64(let number): .integer(number)
        case .double(let number): .real(number)
        case .string(let text): .text(text)
        case .blob(let data): .blob(data)
        }
    }
}

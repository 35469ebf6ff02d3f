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

// Optional reads: a NULL is `nil` here and said by the decoder, so that no error of GRDB's (which
// describes the whole row, password hashes included) is made of a stored value.
extension Row: SQLRow {
    public func string(_ column: String) throws -> String? { try checked(column, decode(String?.self, forColumn: column)) }
    public func integer(_ column: String) throws -> Int64? { try checked(column, decode(Int64?.self, forColumn: column)) }
    public func real(_ column: String) throws -> Double? { try checked(column, decode(Double?.self, forColumn: column)) }
    public func bool(_ column: String) throws -> Bool? { try checked(column, decode(Bool?.self, forColumn: column)) }
    public func blob(_ column: String) throws -> Data? { try checked(column, decode(Data?.self, forColumn: column)) }

    /// GRDB reads a column the row lacks as NULL: a statement and its decoder that disagree are an error here.
    private func checked<T>(_ column: String, _ value: T?) throws -> T? {
        if value == nil, !hasColumn(column) { throw SQLMissingColumn(column: column) }
        return value
    }
}

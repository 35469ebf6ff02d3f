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
    /// The arguments go in as optional existentials: GRDB's initializer for a
    /// sequence of one convertible type maps it with a key path, and a key path
    /// in that unspecialized generic code is built anew on every call (2% of
    /// the daemon's samples while it pushed, on the one thread that writes).
    func prepared(_ statement: SQLStatement) throws -> (Statement, StatementArguments) {
        let values = statement.arguments.map { value -> (any DatabaseValueConvertible)? in value.databaseValue }
        return (try cachedStatement(sql: statement.questionMarked), StatementArguments(values))
    }

    func fetch(_ statement: SQLStatement) throws -> [SQLiteRow] {
        let (prepared, arguments) = try prepared(statement)
        let columns = SQLiteColumns(prepared)
        return try Row.fetchAll(prepared, arguments: arguments).map { SQLiteRow($0, columns) }
    }

    func fetchFirst(_ statement: SQLStatement) throws -> SQLiteRow? {
        let (prepared, arguments) = try prepared(statement)
        return try Row.fetchOne(prepared, arguments: arguments).map { SQLiteRow($0, SQLiteColumns(prepared)) }
    }

    /// Each row of a statement's result in turn, read as it is stepped (not copied): for results
    /// too large to hold twice, such as every live request at start-up. A row is valid only
    /// inside `body`: read what it holds there, never keep the row.
    func forEach(_ statement: SQLStatement, _ body: (SQLiteRow) throws -> Void) throws {
        let (prepared, arguments) = try prepared(statement)
        let columns = SQLiteColumns(prepared)
        let rows = try Row.fetchCursor(prepared, arguments: arguments)
        while let row = try rows.next() { try body(SQLiteRow(row, columns)) }
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

/// Where each column of a statement's result sits, by the name the statement gives it (the first,
/// if two share one), found once for the whole result. GRDB's lookup by name ignores case and
/// lowercases every name it passes on each read; a scan of the row makes every column's value on
/// each read, which made loading 100,000 live requests at start-up take seconds.
struct SQLiteColumns: Sendable {
    let positions: [String: Int]

    init(_ statement: Statement) {
        var positions: [String: Int] = [:]
        for (position, name) in statement.columnNames.enumerated() where positions[name] == nil { positions[name] = position }
        self.positions = positions
    }
}

/// A row of a result with its statement's column positions.
//
// Each column is read as SQLite stored it and checked against the kind asked for: no silent
// conversion (text read as a number would be 0), and no error of GRDB's, whose description holds
// the whole row (password hashes included), is made of a stored value.
struct SQLiteRow: SQLRow {
    let row: Row
    let columns: SQLiteColumns

    init(_ row: Row, _ columns: SQLiteColumns) {
        self.row = row
        self.columns = columns
    }

    public func string(_ column: String) throws -> String? {
        try read(column, expected: "text") { if case .string(let text) = $0 { text } else { nil } }
    }

    public func integer(_ column: String) throws -> Int64? {
        try read(column, expected: "an integer") { if case .int64(let number) = $0 { number } else { nil } }
    }

    public func real(_ column: String) throws -> Double? {
        try read(column, expected: "a real number") {
            switch $0 {
            case .double(let number): number
            case .int64(let number): Double(number)
            default: nil
            }
        }
    }

    /// SQLite keeps a boolean as 0 or 1.
    public func bool(_ column: String) throws -> Bool? {
        try read(column, expected: "a boolean (0 or 1)") { if case .int64(let number) = $0 { number != 0 } else { nil } }
    }

    public func blob(_ column: String) throws -> Data? {
        try read(column, expected: "a blob") { if case .blob(let data) = $0 { data } else { nil } }
    }

    /// NULL is `nil`; a value `pick` does not take is refused naming the column and both kinds.
    private func read<T>(_ column: String, expected: String, _ pick: (DatabaseValue.Storage) -> T?) throws -> T? {
        let value = try stored(column)
        if case .null = value { return nil }
        guard let picked = pick(value) else { throw Self.mismatch(column, expected: expected, value) }
        return picked
    }

    /// The column's value as stored (`DatabaseValue`, not an optional: no generic metadata to look up per column).
    private func stored(_ column: String) throws -> DatabaseValue.Storage {
        // The statements name their columns as the schema spells them; GRDB's own
        // lookup, which ignores case, is left for a name spelled otherwise.
        do {
            if let position = columns.positions[column] { return try row.decode(DatabaseValue.self, atIndex: position).storage }
            return try row.decode(DatabaseValue.self, forColumn: column).storage
        } catch {
            throw SQLMissingColumn(column: column)
        }
    }

    private static func mismatch(_ column: String, expected: String, _ found: DatabaseValue.Storage) -> SQLDecodingError {
        let kind =
            switch found {
            case .null: "NULL"
            case .int64: "an integer"
            case .double: "a real number"
            case .string: "text"
            case .blob: "a blob"
            }
        return SQLDecodingError(column: column, expected: expected, foundKind: kind)
    }
}

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
        return try rows(of: prepared, arguments: arguments)
    }

    func fetchFirst(_ statement: SQLStatement) throws -> SQLiteRow? {
        let (prepared, arguments) = try prepared(statement)
        return try rows(of: prepared, arguments: arguments, limit: 1).first
    }

    /// The rows of a prepared statement's result, each copied as SQLite stored it (at most `limit`).
    func rows(of prepared: Statement, arguments: StatementArguments, limit: Int = .max) throws -> [SQLiteRow] {
        let columns = SQLiteColumns(prepared)
        let cursor = try StatementStep.fetchCursor(prepared, arguments: arguments)
        var rows: [SQLiteRow] = []
        while rows.count < limit, try cursor.next() != nil {
            rows.append(SQLiteRow(copying: prepared, columns))
        }
        return rows
    }

    /// Each row of a statement's result in turn, read where SQLite holds it as it is stepped (not
    /// copied): for results too large to hold twice, such as every live request at start-up. A row
    /// is valid only inside `body`: read what it holds there, never keep the row.
    func forEach(_ statement: SQLStatement, _ body: (SQLiteRow) throws -> Void) throws {
        let (prepared, arguments) = try prepared(statement)
        try forEach(prepared, arguments: arguments, body)
    }

    /// ``forEach(_:_:)`` for a statement prepared here.
    func forEach(_ prepared: Statement, arguments: StatementArguments, _ body: (SQLiteRow) throws -> Void) throws {
        let columns = SQLiteColumns(prepared)
        let rows = try StatementStep.fetchCursor(prepared, arguments: arguments)
        let cursor = ColumnCursor()
        while try rows.next() != nil { try body(SQLiteRow(stepped: prepared.sqliteStatement, columns, cursor: cursor)) }
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

/// The names of a statement's result columns by position, looked up by the name a model reads
/// (the first, if two share one). No table is built: a statement's names are read where
/// SQLite keeps them (GRDB's `columnNames`, made once per cached statement), and a model reads
/// its columns in the statement's order, so nearly every lookup is one comparison with the
/// column after the last found. Building a dictionary of names for every fetch was 5 % of the
/// daemon's CPU under `/v1` creates, which fetch four to five times each.
struct SQLiteColumns: Sendable {
    /// The names by position.
    let names: [String]

    init(_ statement: Statement) {
        names = statement.columnNames
    }

    /// The position of `column`: the one after the last found, if it has that name, else the first
    /// with that name, else the first with that name in another case (SQLite's names ignore case).
    func position(of column: String, after last: ColumnCursor) -> Int? {
        let guess = last.next
        let found =
            if guess < names.count, names[guess] == column {
                guess
            } else {
                names.firstIndex(of: column) ?? Self.folded(column, in: names)
            }
        guard let found else { return nil }
        last.next = found + 1
        return found
    }

    private static func folded(_ column: String, in names: [String]) -> Int? {
        let lowered = column.lowercased()
        return names.firstIndex { $0.lowercased() == lowered }
    }
}

/// One step of a statement, nothing read: GRDB's cursor of a single column's values steps the
/// statement (arguments bound, the statement reset when the cursor ends) and makes one of these
/// per row; ``SQLiteRow`` then reads the row. GRDB's `Row` cursor, which did the stepping before,
/// builds a dictionary of lowercased column names each time it starts, used by no one here.
struct StatementStep: DatabaseValueConvertible, StatementColumnConvertible {
    init() {}
    init?(sqliteStatement: SQLiteStatement, index: CInt) {}
    /// Every row is a step, whatever its first column holds (`NULL` included).
    static func fromStatement(_ sqliteStatement: SQLiteStatement, atUncheckedIndex index: CInt) -> Self? { Self() }
    var databaseValue: DatabaseValue { .null }
    static func fromDatabaseValue(_ dbValue: DatabaseValue) -> Self? { Self() }
}

/// Where the next column read from a row probably is (``SQLiteColumns/position(of:after:)``).
/// Each row has its own; a row is read on one thread.
final class ColumnCursor {
    var next = 0
}

/// A row of a result with its statement's column positions: either copied out of the statement
/// (``Database/rows(of:arguments:limit:)``), or read in place while the statement stands on it
/// (``Database/forEach(_:_:)``).
//
// Each column is read as SQLite stored it and checked against the kind asked for: no silent
// conversion (text read as a number would be 0), and no error of GRDB's, whose description holds
// the whole row (password hashes included), is made of a stored value. Values are read with
// `DatabaseValue(sqliteStatement:index:)`: GRDB's `Row` decodes each through generic code that looked
// up type metadata on every read, most of the time spent loading a million live requests at start-up.
struct SQLiteRow: SQLRow {
    private enum Values {
        case copied([DatabaseValue])
        case stepped(SQLiteStatement)
    }

    private let values: Values
    let columns: SQLiteColumns
    private let cursor: ColumnCursor

    /// The row the statement stands on, copied: it stays valid after the statement moves on.
    init(copying statement: Statement, _ columns: SQLiteColumns) {
        let sqliteStatement = statement.sqliteStatement
        values = .copied((0..<CInt(statement.columnCount)).map { DatabaseValue(sqliteStatement: sqliteStatement, index: $0) })
        self.columns = columns
        cursor = ColumnCursor()
    }

    /// The row the statement stands on, read in place: valid only until the statement moves on.
    /// `cursor` starts at the first column (the rows of one statement, read one after the other, share one).
    init(stepped statement: SQLiteStatement, _ columns: SQLiteColumns, cursor: ColumnCursor) {
        values = .stepped(statement)
        self.columns = columns
        cursor.next = 0
        self.cursor = cursor
    }

    public func string(_ column: String) throws -> String? {
        switch try stored(column) {
        case .null: nil
        case .string(let text): text
        case let found: throw Self.mismatch(column, expected: "text", found)
        }
    }

    public func integer(_ column: String) throws -> Int64? {
        switch try stored(column) {
        case .null: nil
        case .int64(let number): number
        case let found: throw Self.mismatch(column, expected: "an integer", found)
        }
    }

    public func real(_ column: String) throws -> Double? {
        switch try stored(column) {
        case .null: nil
        case .double(let number): number
        case .int64(let number): Double(number)
        case let found: throw Self.mismatch(column, expected: "a real number", found)
        }
    }

    /// SQLite keeps a boolean as 0 or 1.
    public func bool(_ column: String) throws -> Bool? {
        switch try stored(column) {
        case .null: nil
        case .int64(let number): number != 0
        case let found: throw Self.mismatch(column, expected: "a boolean (0 or 1)", found)
        }
    }

    public func blob(_ column: String) throws -> Data? {
        switch try stored(column) {
        case .null: nil
        case .blob(let data): data
        case let found: throw Self.mismatch(column, expected: "a blob", found)
        }
    }

    /// The column's value as stored.
    private func stored(_ column: String) throws -> DatabaseValue.Storage {
        guard let position = columns.position(of: column, after: cursor) else { throw SQLMissingColumn(column: column) }
        switch values {
        case .copied(let values): return values[position].storage
        case .stepped(let statement): return DatabaseValue(sqliteStatement: statement, index: CInt(position)).storage
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

import CountersignSQL
import Foundation
import Logging
import PostgresNIO

// The shared statements (CountersignSQL) as PostgresNIO runs them: `$1` placeholders, bound values.

extension PostgresQuery {
    init(_ statement: SQLStatement) {
        var bindings = PostgresBindings(capacity: statement.arguments.count)
        for argument in statement.arguments {
            switch argument {
            case .null: bindings.appendNull()
            case .integer(let number): bindings.append(number)
            case .real(let number): bindings.append(number)
            case .text(let text): bindings.append(text)
            case .blob(let data): bindings.append(ByteBuffer(bytes: data))
            case .bool(let flag): bindings.append(flag)
            }
        }
        self.init(unsafeSQL: statement.numbered, binds: bindings)
    }
}

extension PostgresStore {
    /// Runs a shared statement on a pooled connection; its rows.
    @discardableResult
    func fetch(_ statement: SQLStatement) async throws -> [PostgresRandomAccessRow] { try await rows(PostgresQuery(statement)) }
}

extension PostgresConnection {
    /// Runs a shared statement; its rows.
    func fetch(_ statement: SQLStatement, _ logger: Logger) async throws -> [PostgresRandomAccessRow] {
        try await rows(PostgresQuery(statement), logger)
    }

    /// Runs a shared statement; returns how many rows it returned (with `RETURNING`: how many it changed).
    @discardableResult
    func perform(_ statement: SQLStatement, _ logger: Logger) async throws -> Int { try await run(PostgresQuery(statement), logger) }
}

// A cell of another type than asked for is refused naming the column and both types: PostgresNIO's
// own decoding error carries the cell's bytes, which may be a hash or a secret.
extension PostgresRandomAccessRow: SQLRow {
    public func string(_ column: String) throws -> String? { try read(column, String?.self, expected: "text") }
    public func integer(_ column: String) throws -> Int64? { try read(column, Int64?.self, expected: "an integer") }
    public func bool(_ column: String) throws -> Bool? { try read(column, Bool?.self, expected: "a boolean") }
    public func blob(_ column: String) throws -> Data? { try read(column, Data?.self, expected: "bytea") }

    public func real(_ column: String) throws -> Double? {
        switch try cell(column).dataType {
        case .int2, .int4, .int8: try read(column, Int64?.self, expected: "a real number").map(Double.init)
        default: try read(column, Double?.self, expected: "a real number")
        }
    }

    private func read<T: PostgresDecodable>(_ column: String, _ type: T.Type, expected: String) throws -> T {
        let cell = try cell(column)
        do {
            return try cell.decode(T.self)
        } catch {
            throw SQLDecodingError(column: column, expected: expected, foundKind: "\(cell.dataType)")
        }
    }

    private func cell(_ column: String) throws -> PostgresCell {
        guard contains(column) else { throw SQLMissingColumn(column: column) }
        return self[column]
    }
}

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

extension PostgresRandomAccessRow: SQLRow {
    public func string(_ column: String) throws -> String? { try cell(column).decode(String?.self) }
    public func integer(_ column: String) throws -> Int64? { try cell(column).decode(Int64?.self) }
    public func real(_ column: String) throws -> Double? { try cell(column).decode(Double?.self) }
    public func bool(_ column: String) throws -> Bool? { try cell(column).decode(Bool?.self) }
    public func blob(_ column: String) throws -> Data? { try cell(column).decode(Data?.self) }

    private func cell(_ column: String) throws -> PostgresCell {
        guard contains(column) else { throw SQLMissingColumn(column: column) }
        return self[column]
    }
}

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
    public func value(_ column: String) throws -> SQLValue {
        guard contains(column) else { throw SQLMissingColumn(column: column) }
        let cell = self[column]
        guard cell.bytes != nil else { return .null }
        switch cell.dataType {
        case .int2, .int4, .int8: return .integer(try cell.decode(Int64.self))
        case .float4, .float8: return .real(try cell.decode(Double.self))
        case .bool: return .bool(try cell.decode(Bool.self))
        case .bytea: return .blob(try cell.decode(Data.self))
        default: return .text(try cell.decode(String.self))
        }
    }
}

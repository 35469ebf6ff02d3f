import CountersignCore
import CountersignSQL
import Foundation
import GRDB

extension SQLiteStore {
    /// The rows of `table` that `countersign migrate` moves, in insertion order.
    public func export(_ table: MigratedTable) async throws -> [[(column: String, value: StoredValue)]] {
        try await pool.read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM \(table.rawValue) WHERE \(table.condition.sql) ORDER BY rowid").map { row in
                row.columnNames.map { column in
                    let value: StoredValue =
                        switch row[column] as DatabaseValue {
                        case let value where value.isNull: .null
                        case let value:
                            switch value.storage {
                            case .int64(let integer): .integer(integer)
                            case .double(let real): .real(real)
                            case .string(let text): .text(text)
                            case .blob(let data): .blob(data)
                            case .null: .null
                            }
                        }
                    return (column, value)
                }
            }
        }
    }
}

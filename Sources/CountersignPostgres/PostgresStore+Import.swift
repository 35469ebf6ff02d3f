import CountersignCore
import CountersignSQL
import Foundation
import PostgresNIO

extension PostgresStore {
    /// Whether the database holds no users, devices, integrations, requests or audit events.
    public func isEmpty() async throws -> Bool {
        try await value(
            Bool.self,
            """
            SELECT NOT (EXISTS (SELECT 1 FROM users) OR EXISTS (SELECT 1 FROM devices) OR EXISTS (SELECT 1 FROM integrations)
                OR EXISTS (SELECT 1 FROM approval_requests) OR EXISTS (SELECT 1 FROM audit_events) OR EXISTS (SELECT 1 FROM outbox))
            """) ?? false
    }

    /// Inserts the rows of every table in one transaction (all or nothing),
    /// then moves the audit trail's id sequence past the copied ids.
    public func importRows(_ tables: [(table: MigratedTable, rows: [[(column: String, value: StoredValue)]])]) async throws {
        try await transaction(bounded: false) { connection in
            for (table, rows) in tables {
                for row in rows {
                    var bindings = PostgresBindings()
                    for (column, value) in row {
                        switch value {
                        case .null: bindings.appendNull()
                        case .integer(let integer) where table.booleanColumns.contains(column): bindings.append(integer != 0)
                        case .integer(let integer): bindings.append(Int(integer))
                        case .real(let real): bindings.append(real)
                        case .text(let text): bindings.append(text)
                        case .blob(let data): try bindings.append(data)
                        }
                    }
                    // Column names come from the source schema, which this version made.
                    let columns = row.map { "\"\($0.column)\"" }.joined(separator: ", ")
                    let placeholders = (1...row.count).map { "$\($0)" }.joined(separator: ", ")
                    try await connection.run(
                        PostgresQuery(unsafeSQL: "INSERT INTO \(table.rawValue) (\(columns)) VALUES (\(placeholders))", binds: bindings), self.logger)
                }
            }
            try await connection.run(
                "SELECT setval(pg_get_serial_sequence('audit_events', 'id'), COALESCE((SELECT max(id) FROM audit_events), 0) + 1, false)", self.logger
            )
        }
    }
}

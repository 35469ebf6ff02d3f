/// What the two databases' schemas and dialects really differ in, where a shared statement needs it.
/// Everything else in a shared statement is SQL both run as written.
public struct SQLDialect: Sendable {
    /// The column that orders outbox rows as they were inserted: SQLite's `rowid`, PostgreSQL's `seq`.
    public let outboxInsertionOrder: SQLFragment
    /// Clears an outbox row's lease: PostgreSQL also records which node holds it.
    public let clearLease: SQLFragment
    /// Equality that takes two NULLs as equal: SQLite's `IS` (its `IS NOT DISTINCT FROM` needs 3.39), the standard's on PostgreSQL.
    public let isNotDistinctFrom: SQLFragment

    public static let sqlite = SQLDialect(outboxInsertionOrder: "rowid", clearLease: "lease_until = NULL", isNotDistinctFrom: "IS")
    public static let postgres = SQLDialect(
        outboxInsertionOrder: "seq", clearLease: "lease_until = NULL, lease_owner = NULL", isNotDistinctFrom: "IS NOT DISTINCT FROM")
}

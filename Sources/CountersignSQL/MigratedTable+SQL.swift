import CountersignCore

/// How `countersign migrate` reads and writes each table it copies.
extension MigratedTable {
    /// Which rows move (SQL condition on the source).
    public var condition: SQLFragment {
        switch self {
        case .approvalRequests: "state IN ('pending', 'approved')"
        case .emailResets: "state = 'active'"
        case .enrollments, .bypassCodes: "used_at IS NULL"
        case .outbox: "state = 'pending'"
        default: "1 = 1"
        }
    }

    /// Columns stored as 0/1 on SQLite and as booleans on PostgreSQL.
    public var booleanColumns: Set<String> {
        switch self {
        case .devices: ["push_enabled", "may_approve_resets"]
        case .integrations: ["enabled", "prompt_all_users", "webhook_public_only"]
        case .bypassCodes: ["for_password_reset"]
        case .approvalRequests: ["device_key_bound"]
        default: []
        }
    }
}

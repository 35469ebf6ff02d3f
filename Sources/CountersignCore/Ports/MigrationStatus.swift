/// Which schema versions a database has, beside those this release knows.
public struct MigrationStatus: Sendable, Equatable {
    /// Known and applied, in order.
    public var applied: [String]
    /// Known and not applied yet: the next start applies them, in order.
    public var pending: [String]
    /// Applied by a newer release: this one refuses the database.
    public var unknown: [String]

    public init(known: [String], applied: Set<String>) {
        self.applied = known.filter(applied.contains)
        self.pending = known.filter { !applied.contains($0) }
        self.unknown = applied.subtracting(known).sorted()
    }
}

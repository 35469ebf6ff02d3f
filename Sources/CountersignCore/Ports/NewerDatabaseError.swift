/// A database that a newer release has migrated: this one does not know all
/// of its schema, so it refuses to run on it rather than misread it.
public struct NewerDatabaseError: Error, CustomStringConvertible {
    /// Where the database is (a path, or a PostgreSQL URL without its password).
    public let database: String
    /// Migrations applied to it that this release does not know.
    public let unknown: [String]
    /// The newest migration this release knows.
    public let newestKnown: String

    public init(database: String, unknown: [String], newestKnown: String) {
        self.database = database
        self.unknown = unknown
        self.newestKnown = newestKnown
    }

    public var description: String {
        "the database \(database) was migrated by a newer release of Countersign (\(unknown.joined(separator: ", "))); "
            + "this release knows the schema up to \(newestKnown): run the newer release, or restore the backup taken before the upgrade"
    }
}

import Foundation

/// A row as either store reads it, by column name. Each store reads a column of each
/// kind its driver's fastest way; decoding a model from a row is written once, over this.
/// Every method answers `nil` for NULL.
public protocol SQLRow {
    func string(_ column: String) throws -> String?
    func integer(_ column: String) throws -> Int64?
    func real(_ column: String) throws -> Double?
    /// A boolean (SQLite keeps 0 or 1).
    func bool(_ column: String) throws -> Bool?
    func blob(_ column: String) throws -> Data?
}

/// A column that does not hold what its model needs: NULL where a value is needed, or a value
/// of another kind. It names the column and the kinds, never the value (a row may hold a hash or a secret).
public struct SQLDecodingError: Error, CustomStringConvertible {
    public let column: String
    public let expected: String
    public let found: String

    @usableFromInline init(column: String, expected: String, found: String = "NULL") {
        self.column = column
        self.expected = expected
        self.found = found
    }

    public init(column: String, expected: String, foundKind: String) {
        self.init(column: column, expected: expected, found: foundKind)
    }

    public var description: String { "column \(column): expected \(expected), found \(found)" }
}

/// A value a column may be decoded to.
public protocol SQLColumnDecodable {
    /// The column's value, `nil` for NULL.
    static func decode(_ column: String, of row: some SQLRow) throws -> Self?
}

extension String: SQLColumnDecodable {
    @inlinable public static func decode(_ column: String, of row: some SQLRow) throws -> String? { try row.string(column) }
}

extension Int: SQLColumnDecodable {
    @inlinable public static func decode(_ column: String, of row: some SQLRow) throws -> Int? { try row.integer(column).map { Int($0) } }
}

extension Int64: SQLColumnDecodable {
    @inlinable public static func decode(_ column: String, of row: some SQLRow) throws -> Int64? { try row.integer(column) }
}

extension Double: SQLColumnDecodable {
    @inlinable public static func decode(_ column: String, of row: some SQLRow) throws -> Double? { try row.real(column) }
}

extension Bool: SQLColumnDecodable {
    @inlinable public static func decode(_ column: String, of row: some SQLRow) throws -> Bool? { try row.bool(column) }
}

extension Data: SQLColumnDecodable {
    @inlinable public static func decode(_ column: String, of row: some SQLRow) throws -> Data? { try row.blob(column) }
}

extension Date: SQLColumnDecodable {
    /// Times are stored as Unix seconds (double precision).
    @inlinable public static func decode(_ column: String, of row: some SQLRow) throws -> Date? {
        try row.real(column).map(Date.init(timeIntervalSince1970:))
    }
}

extension SQLRow {
    /// A column that is never NULL.
    @inlinable public func get<T: SQLColumnDecodable>(_ column: String, as type: T.Type = T.self) throws -> T {
        guard let value = try T.decode(column, of: self) else { throw SQLDecodingError(column: column, expected: "\(T.self)") }
        return value
    }

    /// A column that may be NULL.
    @inlinable public func get<T: SQLColumnDecodable>(_ column: String, as type: T?.Type = T?.self) throws -> T? {
        try T.decode(column, of: self)
    }
}

/// A statement's row has no column of that name (a statement and its decoder disagree).
public struct SQLMissingColumn: Error, CustomStringConvertible {
    public let column: String
    public init(column: String) { self.column = column }
    public var description: String { "no column \(column) in the row" }
}

/// Rows of a `GROUP BY` count (``ApprovalSQL/liveCounts``, ``OutboxSQL/depth``): the count in column `n` by the
/// value of `column`; a value this version does not know is left out.
public func counts<Key: RawRepresentable & Hashable>(_ rows: [some SQLRow], by column: String) throws -> [Key: Int]
where Key.RawValue == String {
    var counts: [Key: Int] = [:]
    for row in rows {
        if let key = Key(rawValue: try row.get(column)) { counts[key] = try row.get("n", as: Int.self) }
    }
    return counts
}

import Foundation

/// A row as either store reads it, by column name. Each store says what one column
/// holds (``value(_:)``); decoding a model from a row is written once, over this.
public protocol SQLRow {
    /// The column's value; throws when the row has no such column.
    func value(_ column: String) throws -> SQLValue
}

/// A column that does not hold what its model expects.
public struct SQLDecodingError: Error, CustomStringConvertible {
    public let column: String
    public let expected: String
    /// What the column held, by kind only: a row may hold a password hash or a secret.
    public let found: String

    @usableFromInline init(column: String, expected: String, found value: SQLValue) {
        self.column = column
        self.expected = expected
        self.found =
            switch value {
            case .null: "NULL"
            case .integer: "an integer"
            case .real: "a real number"
            case .text: "text"
            case .blob: "a blob"
            case .bool: "a boolean"
            }
    }

    public var description: String { "column \(column): expected \(expected), found \(found)" }
}

/// A value a column may be decoded to.
public protocol SQLColumnDecodable {
    static func decode(_ value: SQLValue) -> Self?
}

extension String: SQLColumnDecodable {
    @inlinable public static func decode(_ value: SQLValue) -> String? {
        if case .text(let text) = value { text } else { nil }
    }
}

extension Int: SQLColumnDecodable {
    @inlinable public static func decode(_ value: SQLValue) -> Int? {
        if case .integer(let number) = value { Int(exactly: number) } else { nil }
    }
}

extension Int64: SQLColumnDecodable {
    @inlinable public static func decode(_ value: SQLValue) -> Int64? {
        if case .integer(let number) = value { number } else { nil }
    }
}

extension Double: SQLColumnDecodable {
    @inlinable public static func decode(_ value: SQLValue) -> Double? {
        switch value {
        case .real(let number): number
        // SQLite may hand back a whole REAL as an integer.
        case .integer(let number): Double(number)
        default: nil
        }
    }
}

extension Bool: SQLColumnDecodable {
    @inlinable public static func decode(_ value: SQLValue) -> Bool? {
        switch value {
        case .bool(let flag): flag
        // SQLite's booleans are 0 and 1.
        case .integer(let number): number != 0
        default: nil
        }
    }
}

extension Data: SQLColumnDecodable {
    @inlinable public static func decode(_ value: SQLValue) -> Data? {
        if case .blob(let data) = value { data } else { nil }
    }
}

extension Date: SQLColumnDecodable {
    @inlinable public static func decode(_ value: SQLValue) -> Date? {
        Double.decode(value).map(Date.init(timeIntervalSince1970:))
    }
}

extension SQLRow {
    /// A column that is never NULL.
    @inlinable public func get<T: SQLColumnDecodable>(_ column: String, as type: T.Type = T.self) throws -> T {
        let value = try value(column)
        guard let decoded = T.decode(value) else { throw SQLDecodingError(column: column, expected: "\(T.self)", found: value) }
        return decoded
    }

    /// A column that may be NULL.
    @inlinable public func get<T: SQLColumnDecodable>(_ column: String, as type: T?.Type = T?.self) throws -> T? {
        let value = try value(column)
        if value == .null { return nil }
        guard let decoded = T.decode(value) else { throw SQLDecodingError(column: column, expected: "\(T.self) or NULL", found: value) }
        return decoded
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

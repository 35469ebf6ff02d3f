import Foundation

/// A statement both stores run, written once: its text and the values bound to its
/// placeholders, in order. Written with interpolation, as PostgresNIO's queries are:
/// `"SELECT * FROM users WHERE id = \(id)"` binds `id`, it never splices it into the
/// text. Each store renders the placeholders its driver takes (`?` for SQLite, `$1`
/// for PostgreSQL); ``SQLStatement/unsafe(_:)`` splices a fragment of trusted SQL.
public struct SQLStatement: Sendable, ExpressibleByStringInterpolation {
    enum Part: Sendable {
        case sql(String)
        case placeholder
    }

    var parts: [Part]
    /// The bound values, in placeholder order.
    public private(set) var arguments: [SQLValue]
    /// The text with `?` for each placeholder (SQLite), built as the statement is: the hot path renders nothing.
    public private(set) var questionMarked: String

    public init(stringLiteral value: String) {
        parts = [.sql(value)]
        arguments = []
        questionMarked = value
    }

    public init(stringInterpolation: StringInterpolation) {
        parts = stringInterpolation.parts
        arguments = stringInterpolation.arguments
        questionMarked = stringInterpolation.questionMarked
    }

    /// The text with each placeholder as `placeholder(n)`, `n` counting from 1.
    func text(placeholder: (Int) -> String) -> String {
        var text = ""
        var count = 0
        for part in parts {
            switch part {
            case .sql(let sql): text += sql
            case .placeholder:
                count += 1
                text += placeholder(count)
            }
        }
        return text
    }

    /// The statement followed by a fragment of the program's own SQL (PostgreSQL's ` FOR UPDATE`, say).
    public func appending(_ fragment: SQLFragment) -> SQLStatement {
        var statement = self
        statement.parts.append(.sql(fragment.sql))
        statement.questionMarked += fragment.sql
        return statement
    }

    /// Puts `other`'s text and values after this statement's (placeholders keep counting on).
    public mutating func append(_ other: SQLStatement) {
        parts += other.parts
        arguments += other.arguments
        questionMarked += other.questionMarked
    }

    /// `$1`, `$2`, … (PostgreSQL).
    public var numbered: String { text { "$\($0)" } }

    public struct StringInterpolation: StringInterpolationProtocol {
        var parts: [Part] = []
        var arguments: [SQLValue] = []
        var questionMarked = ""

        public init(literalCapacity: Int, interpolationCount: Int) {
            parts.reserveCapacity(interpolationCount * 2 + 1)
            arguments.reserveCapacity(interpolationCount)
            questionMarked.reserveCapacity(literalCapacity + interpolationCount)
        }

        public mutating func appendLiteral(_ literal: String) {
            if !literal.isEmpty { parts.append(.sql(literal)) }
            questionMarked += literal
        }

        /// A bound value.
        public mutating func appendInterpolation(_ value: some SQLBindable) {
            parts.append(.placeholder)
            arguments.append(value.sqlValue)
            questionMarked += "?"
        }

        /// A bound value that may be NULL.
        public mutating func appendInterpolation(_ value: (some SQLBindable)?) {
            parts.append(.placeholder)
            arguments.append(value?.sqlValue ?? .null)
            questionMarked += "?"
        }

        /// A fragment of the program's own SQL (a column list, a condition), never a value from outside.
        public mutating func appendInterpolation(unsafe fragment: SQLFragment) {
            parts.append(.sql(fragment.sql))
            questionMarked += fragment.sql
        }
    }
}

/// SQL text the program wrote itself, spliced into a statement as it is.
public struct SQLFragment: Sendable, ExpressibleByStringLiteral {
    public let sql: String
    public init(stringLiteral sql: String) { self.sql = sql }
}

/// A value bound to a placeholder. Booleans stay booleans (SQLite stores 0 or 1,
/// PostgreSQL a boolean); times are Unix seconds (double) on both.
public enum SQLValue: Sendable, Equatable {
    case null
    case integer(Int64)
    case real(Double)
    case text(String)
    case blob(Data)
    case bool(Bool)
}

/// A Swift value a statement may bind.
public protocol SQLBindable {
    var sqlValue: SQLValue { get }
}

extension String: SQLBindable { public var sqlValue: SQLValue { .text(self) } }
extension Int: SQLBindable { public var sqlValue: SQLValue { .integer(Int64(self)) } }
extension Int64: SQLBindable { public var sqlValue: SQLValue { .integer(self) } }
extension Double: SQLBindable { public var sqlValue: SQLValue { .real(self) } }
extension Bool: SQLBindable { public var sqlValue: SQLValue { .bool(self) } }
extension Data: SQLBindable { public var sqlValue: SQLValue { .blob(self) } }
extension Date: SQLBindable {
    /// Times are stored as Unix seconds (double precision), so that SQL can compare them.
    public var sqlValue: SQLValue { .real(timeIntervalSince1970) }
}

import CountersignCore
import Foundation

/// Field checks shared by the routes: each failure names its field.
enum Field {
    static func text(_ value: String, _ name: String, maxBytes: Int, allowEmpty: Bool = false) throws -> String {
        let trimmed = value.trimmingWhitespace()
        if trimmed.isEmpty && !allowEmpty {
            throw APIError.invalidRequest("The field `\(name)` must not be empty.")
        }
        if trimmed.utf8.count > maxBytes {
            throw APIError.invalidRequest("The field `\(name)` is longer than \(maxBytes) bytes.")
        }
        if trimmed.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) {
            throw APIError.invalidRequest("The field `\(name)` contains control characters.")
        }
        return trimmed
    }

    /// A name a person reads (a device's name, its platform): text, and no line or
    /// paragraph separator or bidirectional control (U+202E would show `gpj.exe` as `exe.jpg`).
    static func name(_ value: String, _ name: String, maxBytes: Int) throws -> String {
        let checked = try text(value, name, maxBytes: maxBytes)
        if checked.unicodeScalars.contains(where: LogText.isSeparatorOrBidi) {
            throw APIError.invalidRequest("The field `\(name)` contains line separators or bidirectional control characters.")
        }
        return checked
    }

    static func email(_ value: String) throws -> String {
        let email = try text(value, "email", maxBytes: 254)
        let parts = email.split(separator: "@", omittingEmptySubsequences: false)
        guard parts.count == 2, !parts[0].isEmpty, parts[1].contains("."), !email.contains(where: \.isWhitespace) else {
            throw APIError.invalidRequest("The field `email` is not an email address.")
        }
        return email
    }

    /// A code typed in the phone's stead: 6 digits (an offline code) or 10
    /// (a bypass code, `48213-90577` or without the dash).
    static func answerCode(_ value: String) throws -> AnswerCode {
        guard value.utf8.count <= 16, let code = AnswerCode(value.trimmingWhitespace()) else {
            throw APIError.invalidRequest(
                "The field `code` must be the 6 digits of an offline code, or the 10 digits of a bypass code (12345-67890).")
        }
        return code
    }

    /// A password as typed: not trimmed, bounded so hashing stays cheap to refuse.
    static func password(_ value: String, _ name: String = "password") throws -> String {
        if value.isEmpty { throw APIError.invalidRequest("The field `\(name)` must not be empty.") }
        if value.utf8.count > 1024 { throw APIError.invalidRequest("The field `\(name)` is longer than 1024 bytes.") }
        return value
    }
}

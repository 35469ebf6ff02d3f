import Foundation

/// The reset link of a mail, from a template with `{token}` and `{email}`
/// placeholders (values percent-encoded): the daemon's own page by default,
/// or an app's deep link (`photosync://reset-password?token={token}&email={email}`).
public struct ResetLinkTemplate: Sendable, Equatable {
    public let template: String

    /// `nil` unless the template has a scheme and a `{token}` placeholder.
    public init?(_ template: String) {
        guard template.contains("{token}"), let colon = template.firstIndex(of: ":"), colon > template.startIndex,
            template[..<colon].allSatisfy({ $0.isLetter || $0.isNumber || $0 == "+" || $0 == "-" || $0 == "." }),
            !template.contains(where: { $0.isWhitespace || $0.isNewline })
        else { return nil }
        self.template = template
    }

    /// `{publicURL}/reset-password?token={token}`.
    public static func page(publicURL: String) -> ResetLinkTemplate {
        var base = publicURL
        while base.hasSuffix("/") { base.removeLast() }
        return ResetLinkTemplate(base + "/reset-password?token={token}")!
    }

    public func link(token: String, email: String) -> String {
        template
            .replacingOccurrences(of: "{token}", with: Self.encode(token))
            .replacingOccurrences(of: "{email}", with: Self.encode(email))
    }

    /// RFC 3986 unreserved characters stay; everything else is percent-encoded.
    static func encode(_ value: String) -> String {
        value.addingPercentEncoding(withAllowedCharacters: unreserved) ?? ""
    }

    private static let unreserved = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
}

extension StringProtocol {
    /// Without leading and trailing white space, the scalars
    /// `trimmingCharacters(in: .whitespacesAndNewlines)` trims: Unicode's
    /// `White_Space` (general category Z, U+0009–U+000D, U+0085) and U+200B,
    /// without the bridge through `NSString` that made it a request's
    /// costliest string call.
    public func trimmingWhitespace() -> String {
        trimming { $0.properties.isWhitespace || $0 == "\u{200B}" }
    }

    /// Without leading and trailing spaces, the scalars
    /// `trimmingCharacters(in: .whitespaces)` trims: general category Zs,
    /// U+0009 and U+200B (no line ends).
    public func trimmingSpaces() -> String {
        trimming { $0.properties.generalCategory == .spaceSeparator || $0 == "\t" || $0 == "\u{200B}" }
    }

    private func trimming(_ isTrimmed: (Unicode.Scalar) -> Bool) -> String {
        let scalars = String(self).unicodeScalars
        guard let first = scalars.firstIndex(where: { !isTrimmed($0) }),
            let last = scalars.lastIndex(where: { !isTrimmed($0) })
        else { return "" }
        return String(scalars[first...last])
    }
}

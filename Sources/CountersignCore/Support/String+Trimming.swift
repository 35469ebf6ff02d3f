extension StringProtocol {
    /// Without leading and trailing white space, the scalars
    /// `trimmingCharacters(in: .whitespacesAndNewlines)` trims: Unicode's
    /// `White_Space` (general category Z, U+0009–U+000D, U+0085) and U+200B,
    /// without the bridge through `NSString` that made it a request's
    /// costliest string call.
    public func trimmingWhitespace() -> String {
        let scalars = String(self).unicodeScalars
        guard let first = scalars.firstIndex(where: { !Self.isTrimmed($0) }),
            let last = scalars.lastIndex(where: { !Self.isTrimmed($0) })
        else { return "" }
        return String(scalars[first...last])
    }

    private static func isTrimmed(_ scalar: Unicode.Scalar) -> Bool {
        scalar.properties.isWhitespace || scalar == "\u{200B}"
    }
}

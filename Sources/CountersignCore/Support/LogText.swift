/// Text from outside (a user agent, a device name, an email, a push service's
/// or a webhook receiver's answer) as it goes into a line of the text log or
/// of `countersign audit`: it stays data. Quotes, backslashes, control
/// characters and line breaks become escapes, and Unicode's bidirectional
/// controls (which reorder what a terminal shows) become `\u{…}`, so that one
/// event is one line and no value can add a field or hide another.
public enum LogText {
    /// `value` escaped (see ``LogText``), without quotes.
    public static func escaped(_ value: String) -> String {
        guard value.unicodeScalars.contains(where: needsEscape) else { return value }
        var out = ""
        out.reserveCapacity(value.utf8.count + 8)
        for scalar in value.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            default:
                if needsEscape(scalar) {
                    out += "\\u{" + String(scalar.value, radix: 16) + "}"
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        return out
    }

    /// `value` as the value of a `key=value` field: escaped, and quoted when it is
    /// empty or holds a space, `=` or a quote, so that it reads back as one field.
    public static func field(_ value: String) -> String {
        let escaped = escaped(value)
        let quoted =
            value.isEmpty
            || value.unicodeScalars.contains {
                $0 == "=" || $0 == "\"" || $0 == "\\" || $0 == "\u{FF1D}" || $0.properties.generalCategory == .spaceSeparator
            }
        return quoted ? "\"" + escaped + "\"" : escaped
    }

    /// Whether a scalar must not appear as itself in a line: a quote, a backslash,
    /// a control character, a line or paragraph separator, or a bidirectional control.
    static func needsEscape(_ scalar: Unicode.Scalar) -> Bool {
        scalar == "\"" || scalar == "\\" || scalar.properties.generalCategory == .control || isSeparatorOrBidi(scalar)
    }

    /// U+2028 and U+2029 (line and paragraph separators) and the bidirectional
    /// controls: U+061C, U+200E–U+200F, U+202A–U+202E, U+2066–U+2069.
    public static func isSeparatorOrBidi(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x061C, 0x200E, 0x200F, 0x2028, 0x2029, 0x202A...0x202E, 0x2066...0x2069: true
        default: false
        }
    }
}

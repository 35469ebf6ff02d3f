import Testing

@testable import CountersignCore

/// trust.md, "Text from outside stays data": a value from outside is one
/// field of one line, whatever it holds.
@Suite struct LogTextTests {
    /// Splits a `key=value …` line as a reader does: spaces separate fields
    /// except inside quotes, where `\"` and `\\` are escapes.
    static func fields(_ line: String) -> [String] {
        var fields: [String] = []
        var current = ""
        var quoted = false
        var escaping = false
        for character in line {
            if escaping {
                current.append(character)
                escaping = false
            } else if character == "\\" {
                current.append(character)
                escaping = true
            } else if character == "\"" {
                current.append(character)
                quoted.toggle()
            } else if character == " " && !quoted {
                fields.append(current)
                current = ""
            } else {
                current.append(character)
            }
        }
        fields.append(current)
        return fields
    }

    @Test func aValueCannotAddAFieldOrALine() {
        let hostile = [
            #"Mozilla/5.0" kind=password_changed user=root"#, "line\nkind=forged", "carriage\rreturn", "tab\there", #"back\slash"#,
            "bell\u{07}", "sep\u{2028}arator", "",
        ]
        for value in hostile {
            let line = "kind=login_ok userAgent=\(LogText.field(value)) ip=127.0.0.1"
            #expect(!line.contains("\n") && !line.contains("\r") && !line.contains("\u{2028}"), "\(value)")
            #expect(Self.fields(line).count == 3, "\(line)")
            #expect(Self.fields(line)[2] == "ip=127.0.0.1", "\(line)")
        }
        #expect(LogText.field(#"Mozilla/5.0" kind=x"#) == #""Mozilla/5.0\" kind=x""#)
        #expect(LogText.field("a\nb") == #"a\nb"#)
        #expect(LogText.field("plain") == "plain")
    }

    @Test func bidirectionalControlsAreShownAsEscapes() {
        #expect(LogText.escaped("Ana\u{202E}gpj.exe") == #"Ana\u{202e}gpj.exe"#)
        for scalar in [0x061C, 0x200E, 0x200F, 0x202A, 0x202B, 0x202C, 0x202D, 0x202E, 0x2066, 0x2067, 0x2068, 0x2069] {
            let text = "x" + String(Character(Unicode.Scalar(UInt32(scalar))!)) + "y"
            #expect(LogText.escaped(text) == "x\\u{\(String(scalar, radix: 16))}y")
        }
        // Other text from elsewhere stays as it is.
        #expect(LogText.escaped("Ana's phone (عربي) ☎︎") == "Ana's phone (عربي) ☎︎")
    }
}

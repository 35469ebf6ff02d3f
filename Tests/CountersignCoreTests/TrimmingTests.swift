import CountersignCore
import Foundation
import PropertyBased
import Testing

@Suite struct TrimmingTests {
    @Test func trimmingWhitespaceTrimsWhatFoundationTrims() async {
        // Letters and every kind of Unicode space and line end, in any order.
        let spaces: [Character] = [
            " ", "\t", "\n", "\r", "\u{0B}", "\u{0C}", "\u{85}", "\u{A0}", "\u{1680}", "\u{2003}", "\u{2028}", "\u{2029}", "\u{202F}", "\u{3000}",
        ]
        let pieces: [Character] = spaces + ["a", "Z", "@", ".", "é", "\u{200B}", "\u{FEFF}"]
        await propertyCheck(count: 500, input: Gen.element(of: pieces).array(of: 0...12)) { characters in
            let text = String(characters.compactMap { $0 })
            #expect(text.trimmingWhitespace() == text.trimmingCharacters(in: .whitespacesAndNewlines), "\(text.debugDescription)")
            #expect(text.trimmingSpaces() == text.trimmingCharacters(in: .whitespaces), "\(text.debugDescription)")
        }
        #expect(User.normalize(email: " \u{3000}Ana@Example.COM\r\n") == "ana@example.com")
    }
}

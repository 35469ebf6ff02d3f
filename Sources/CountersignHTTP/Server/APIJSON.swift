import Foundation

/// The encoder of every JSON answer: one, shared (its options never change).
enum APIJSON {
    static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }()
}

/// Text that can stand between JSON quotes as it is.
enum JSONText {
    /// Printable ASCII other than `"` and `\`: JSON needs no escape for it
    /// (``APIJSON/encoder`` leaves `/` as it is).
    static func needsNoEscaping(_ text: String) -> Bool {
        text.utf8.allSatisfy { $0 >= 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: "\\") }
    }
}

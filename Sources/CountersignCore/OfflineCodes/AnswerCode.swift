import CountersignWire

/// A code a requester typed to answer a request in the phone's stead.
public enum AnswerCode: Sendable, Equatable {
    /// 6 digits: the offline code (TOTP) a trusted device shows.
    case offline(String)
    /// 10 digits an operator issued, as digits only (typed with or without the `-` after the fifth).
    case bypass(String)

    /// `nil` for anything else: letters, spaces, other lengths.
    public init?(_ text: String) {
        let bytes = Array(text.utf8)
        func digits(_ slice: ArraySlice<UInt8>) -> Bool { slice.allSatisfy { $0 >= 0x30 && $0 <= 0x39 } }
        switch bytes.count {
        case TOTP.digits where digits(bytes[...]):
            self = .offline(text)
        case BypassCode.digits where digits(bytes[...]):
            self = .bypass(text)
        case BypassCode.digits + 1 where bytes[5] == UInt8(ascii: "-") && digits(bytes[..<5]) && digits(bytes[6...]):
            self = .bypass(String(decoding: bytes[..<5] + bytes[6...], as: UTF8.self))
        default:
            return nil
        }
    }
}

/// Operator-issued one-time codes for a user who has no device at hand.
public enum BypassCode {
    /// Digits per code.
    public static let digits = 10

    /// A fresh code, digits only.
    public static func generate() -> String {
        var rng = SystemRandomNumberGenerator()
        return (0..<digits).map { _ in String(UInt8.random(in: 0...9, using: &rng)) }.joined()
    }

    /// As printed: two groups of five (`48213-90577`).
    public static func display(_ code: String) -> String {
        "\(code.prefix(5))-\(code.dropFirst(5))"
    }

    /// The keyed hash a user's code is stored and looked up under.
    public static func hash(_ code: String, userID: String, keys: SecretKeys) -> String {
        keys.hash(code, context: "bypass code \(userID)")
    }
}

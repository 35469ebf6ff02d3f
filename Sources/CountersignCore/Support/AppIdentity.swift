/// The phone app's own name, as the daemon writes it into links and authenticator entries:
/// the scheme of enrollment links (`--app-link-scheme`, `countersign://enroll?…`) and the
/// issuer of `otpauth://` URIs (`--otp-issuer`). An app under another name uses its own.
public struct AppIdentity: Sendable, Equatable {
    public var linkScheme: String
    public var otpIssuer: String

    public init(linkScheme: String = "countersign", otpIssuer: String = "Countersign") {
        self.linkScheme = linkScheme
        self.otpIssuer = otpIssuer
    }

    /// A URI scheme (RFC 3986): a lower-case letter, then letters, digits, `+`, `-` or `.`; at most 32.
    public static func isLinkScheme(_ text: String) -> Bool {
        guard let first = text.utf8.first, (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(first), text.utf8.count <= 32 else {
            return false
        }
        return text.utf8.allSatisfy { byte in
            (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
                || byte == UInt8(ascii: "+") || byte == UInt8(ascii: "-") || byte == UInt8(ascii: ".")
        }
    }

    /// An issuer authenticators show: 1 to 64 printable characters, no `:` (it ends the issuer in the URI's label).
    public static func isOTPIssuer(_ text: String) -> Bool {
        !text.isEmpty && text.count <= 64 && !text.contains(":")
            && text.unicodeScalars.allSatisfy {
                !$0.properties.isDefaultIgnorableCodePoint && $0.value >= 0x20 && $0.value != 0x7F && !(0x80..<0xA0).contains($0.value)
            }
    }
}

import Foundation

/// The one-time code that enrolls a device for a user created by an
/// integration: 12 characters of an unambiguous alphabet (about 59 bits),
/// shown as `7KQ4-M2XD-9PJ3`, stored only as a keyed hash.
public enum EnrollmentCode {
    /// No 0/O, 1/I/L or U: what a person can type from a screen.
    static let alphabet = Array("23456789ABCDEFGHJKMNPQRSTVWXYZ")
    static let length = 12
    /// How long a code is good for.
    public static let ttl: TimeInterval = 600

    public static func generate() -> String {
        var rng = SystemRandomNumberGenerator()
        let characters = (0..<length).map { _ in alphabet[Int.random(in: 0..<alphabet.count, using: &rng)] }
        return stride(from: 0, to: length, by: 4).map { String(characters[$0..<$0 + 4]) }.joined(separator: "-")
    }

    /// The code as typed (any case, with or without dashes and spaces) in its
    /// stored form, or `nil` when it cannot be a code.
    public static func normalize(_ typed: String) -> String? {
        let characters = typed.uppercased().filter { $0 != "-" && $0 != " " }
        guard characters.count == length, characters.allSatisfy(alphabet.contains) else { return nil }
        return stride(from: 0, to: length, by: 4).map { start in
            let from = characters.index(characters.startIndex, offsetBy: start)
            return String(characters[from..<characters.index(from, offsetBy: 4)])
        }.joined(separator: "-")
    }

    /// The keyed hash a code is stored and looked up under.
    public static func hash(_ normalized: String, keys: SecretKeys) -> String {
        keys.hash(normalized, context: "enrollment")
    }
}

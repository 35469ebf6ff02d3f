/// New password rules of the API: at least 8 characters, at most 72 bytes of
/// UTF-8 (bcrypt ignores anything past 72 bytes), and no control characters
/// (bcrypt stops at a NUL: `"\u{0}abcdefg"` would be the empty password).
public enum PasswordPolicy {
    public static let minimumCharacters = 8
    public static let maximumBytes = 72

    /// A sentence naming the broken rule, or `nil` when the password is acceptable.
    public static func violation(of password: String) -> String? {
        if password.count < minimumCharacters {
            return "The new password must have at least \(minimumCharacters) characters."
        }
        if password.utf8.count > maximumBytes {
            return "The new password must be at most \(maximumBytes) bytes long."
        }
        if password.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) {
            return "The new password must not contain control characters."
        }
        return nil
    }
}

/// The 6-digit code of an email reset.
public enum ResetCode {
    /// 000000–999999, uniform, from the system CSPRNG.
    public static func generate() -> String {
        var rng = SystemRandomNumberGenerator()
        let value = UInt32.random(in: 0..<1_000_000, using: &rng)
        let digits = String(value)
        return String(repeating: "0", count: 6 - digits.count) + digits
    }

    /// Six ASCII digits: anything else cannot be a code.
    public static func isWellFormed(_ text: String) -> Bool {
        text.utf8.count == 6 && text.utf8.allSatisfy { $0 >= 0x30 && $0 <= 0x39 }
    }
}

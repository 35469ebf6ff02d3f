/// Why a code or link was not accepted. Callers answer all of these alike
/// (`invalid_code`), so a guesser cannot tell which one it was.
public struct InvalidResetCode: Error, Equatable {
    /// For the audit trail and logs only.
    public let reason: String

    public init(_ reason: String) { self.reason = reason }
}

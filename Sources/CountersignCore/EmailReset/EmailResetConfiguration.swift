import Foundation

public struct EmailResetConfiguration: Sendable, Equatable {
    /// How long a code and its link work.
    public var codeTTL: TimeInterval
    /// Tries (right or wrong) one issued code takes before it is used up.
    public var maxTries: Int
    /// Whether mail is configured. Without it nothing is queued: initiate
    /// answers the same, and no code leaves the daemon.
    public var mailEnabled: Bool

    public init(codeTTL: TimeInterval = 900, maxTries: Int = 5, mailEnabled: Bool = false) {
        self.codeTTL = codeTTL
        self.maxTries = maxTries
        self.mailEnabled = mailEnabled
    }
}

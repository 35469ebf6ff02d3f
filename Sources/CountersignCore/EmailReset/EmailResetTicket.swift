import Foundation

/// One issued email reset: a 6-digit code and a link token, both stored only
/// as keyed hashes (``SecretKeys``), good for one password change.
public struct EmailResetTicket: Sendable, Equatable {
    public enum State: String, Sendable {
        /// Issued, not used: the code and the link work until `expiresAt`, for `maxTries` tries.
        case active
        /// A password was set with it.
        case used
        /// A newer initiate for the same address voided it.
        case replaced
    }

    public var id: String
    /// `nil` for an address with no account: the ticket exists so that both
    /// cases do the same work, and no code or link for it was ever sent.
    public var userID: String?
    public var email: String
    public var codeHash: String
    public var tokenHash: String
    public var createdAt: Date
    public var expiresAt: Date
    /// Tries counted so far (right or wrong).
    public var tries: Int
    public var state: State

    public init(
        id: String, userID: String?, email: String, codeHash: String, tokenHash: String, createdAt: Date, expiresAt: Date,
        tries: Int = 0, state: State = .active
    ) {
        self.id = id
        self.userID = userID
        self.email = email
        self.codeHash = codeHash
        self.tokenHash = tokenHash
        self.createdAt = createdAt
        self.expiresAt = expiresAt
        self.tries = tries
        self.state = state
    }

    /// Why it cannot be used at `now`, or `nil` when it can. A ticket of an
    /// address without an account passes this (and has its tries counted like
    /// any other, so both cases do the same work); it is refused after that.
    public func refusal(at now: Date, maxTries: Int) -> String? {
        switch state {
        case .used: return "already used"
        case .replaced: return "replaced by a newer code"
        case .active: break
        }
        if now >= expiresAt { return "expired" }
        if tries >= maxTries { return "used up after \(maxTries) tries" }
        return nil
    }
}

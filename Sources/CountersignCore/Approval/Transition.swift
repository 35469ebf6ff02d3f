import Foundation

/// Why a request changed state. Kept with each transition for logs and the audit trail.
public enum TransitionCause: String, Sendable, Equatable {
    case approvedByDevice = "approved"
    /// The requester typed a trusted device's offline code.
    case approvedByOfflineCode = "offline_code"
    /// The requester typed a bypass code the operator issued.
    case approvedByBypassCode = "bypass_code"
    /// The last wrong code a request takes (``CodeAnswers/wrongCodesAllowed``).
    case codesExhausted = "offline_code_exhausted"
    case deniedByDevice = "denied"
    case numberMismatch = "number_mismatch"
    case completedByRequester = "completed"
    case cancelledByRequester = "cancelled"
    case supersededByNewerRequest = "superseded"
    /// The password changed another way (an email reset): a phone reset must not overwrite it.
    case passwordChanged = "password_changed"
    /// The user was erased (`countersign user delete`, `DELETE /v1/users/{email}`).
    case userErased = "user_erased"
    /// The integration that made the request was deleted (`countersign integration delete`).
    case integrationDeleted = "integration_deleted"
    case timedOut = "expired"
}

/// A decided change of state. `from` is what the database row must still hold
/// for the change to apply: the conditional update on it decides races.
public struct Transition: Sendable, Equatable {
    public var from: ApprovalState
    public var to: ApprovalState
    public var cause: TransitionCause
    public var at: Date

    public init(from: ApprovalState, to: ApprovalState, cause: TransitionCause, at: Date) {
        self.from = from
        self.to = to
        self.cause = cause
        self.at = at
    }
}

import Foundation

/// Why a request changed state. Kept with each transition for logs and the audit trail.
public enum TransitionCause: String, Sendable, Equatable {
    case approvedByDevice = "approved"
    case deniedByDevice = "denied"
    case numberMismatch = "number_mismatch"
    case completedByRequester = "completed"
    case cancelledByRequester = "cancelled"
    case supersededByNewerRequest = "superseded"
    /// The password changed another way (an email reset): a phone reset must not overwrite it.
    case passwordChanged = "password_changed"
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

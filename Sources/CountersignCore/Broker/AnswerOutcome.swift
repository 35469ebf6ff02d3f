/// How a device's answer ended, as the broker recorded it.
public enum AnswerOutcome: Sendable, Equatable {
    case approved
    case denied
    /// The number code did not match: the request is denied (no second try).
    case numberMismatch

    init(_ cause: TransitionCause) {
        switch cause {
        case .approvedByDevice, .approvedByOfflineCode, .approvedByBypassCode: self = .approved
        case .numberMismatch: self = .numberMismatch
        default: self = .denied
        }
    }
}

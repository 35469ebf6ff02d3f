extension TransitionCause {
    /// The audit event a committed transition of this cause records.
    var auditKind: AuditKind {
        switch self {
        case .approvedByDevice: .approved
        case .deniedByDevice: .denied
        case .numberMismatch: .numberMismatch
        case .completedByRequester: .completed
        case .cancelledByRequester, .supersededByNewerRequest, .passwordChanged: .cancelled
        case .timedOut: .expired
        }
    }
}

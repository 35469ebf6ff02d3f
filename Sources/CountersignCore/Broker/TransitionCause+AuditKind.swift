extension TransitionCause {
    /// The audit event a committed transition of this cause records.
    var auditKind: AuditKind {
        switch self {
        case .approvedByDevice, .approvedByOfflineCode, .approvedByBypassCode: .approved
        case .codesExhausted: .offlineCodeExhausted
        case .deniedByDevice: .denied
        case .numberMismatch: .numberMismatch
        case .completedByRequester: .completed
        case .cancelledByRequester, .supersededByNewerRequest, .passwordChanged, .userErased, .integrationDeleted: .cancelled
        case .timedOut: .expired
        }
    }
}

/// What a committed transition owes beyond its row, decided from the
/// transition and the request alone: the audit events, whether an
/// integration's webhook event waits in the outbox, and the resolution push
/// that takes the prompt off the user's devices. The broker applies them.
struct TransitionEffects: Equatable {
    /// To append to the audit trail (not the transition's own event when it was written with it: a signed answer's).
    var audit: [AuditEvent] = []
    /// An integration's approval: its webhook event was queued with the transition.
    var ringsOutbox = false
    /// The request left `pending`: its prompt comes off the devices.
    var push: PushJob?

    /// - Parameter auditedWithIt: the transition's audit event was written in its transaction.
    init(of transition: Transition, on request: ApprovalRequest, context: AuditContext, auditedWithIt: Bool) {
        if !auditedWithIt { audit.append(Self.auditEvent(transition, request, context: context)) }
        if transition.setsPassword(of: request) {
            // Completing is what sets the password (same transaction); the trail names the path.
            audit.append(
                AuditEvent(
                    at: transition.at, kind: .passwordChanged, userID: request.recipient.accountID, requestRef: request.logReference,
                    context: context, detail: "phone approval"))
        }
        ringsOutbox = request.prompt != nil
        if transition.from == .pending, let userID = request.userID {
            push = .resolved(requestID: request.id, userID: userID, status: transition.to)
        }
    }

    /// The audit event of a transition.
    static func auditEvent(_ transition: Transition, _ request: ApprovalRequest, context: AuditContext) -> AuditEvent {
        var details: [String] = []
        if let prompt = request.prompt { details.append("integration \(prompt.integrationName)") }
        switch transition.cause {
        case .supersededByNewerRequest: details.append("superseded by a newer request")
        case .approvedByOfflineCode: details.append("offline code; the answer carries no signature")
        case .approvedByBypassCode: details.append("bypass code")
        case .codesExhausted: details.append("\(CodeAnswers.wrongCodesAllowed) wrong codes")
        case .userErased: details.append("the user was erased")
        case .integrationDeleted: details.append("its integration was deleted")
        default: break
        }
        return AuditEvent(
            at: transition.at, kind: transition.cause.auditKind, userID: request.recipient.accountID, requestRef: request.logReference,
            context: context, detail: details.isEmpty ? nil : details.joined(separator: "; "))
    }
}

import Foundation

/// The approval state machine as a value: every rule of the request's life,
/// with no I/O. ``ApprovalBroker`` owns one per operation, applies the action
/// it returns and persists the resulting ``request``.
///
/// | from     | to        | when |
/// |----------|-----------|------|
/// | pending  | approved  | a device approves before `expiresAt` (with the right code when matching is on) |
/// | pending  | approved  | the requester types a right offline or bypass code before `expiresAt` |
/// | pending  | denied    | a device denies, or sends a wrong number code (no second try), or the 5th wrong offline code |
/// | pending  | expired   | `expiresAt` passes |
/// | pending  | cancelled | the requester cancels, or a newer request for the same subject starts |
/// | approved | completed | the requester completes before `completeBy`; exactly once |
/// | approved | expired   | `completeBy` passes |
/// | pending, approved | cancelled | the password changed another way (an email reset), for a phone reset |
public struct ApprovalStateMachine: Sendable {
    public private(set) var request: ApprovalRequest

    public init(_ request: ApprovalRequest) {
        self.request = request
    }

    /// The state as any reader must see it at `now`: a live request whose
    /// deadline has passed reads `expired` even before the sweeper wrote it.
    public func state(at now: Date) -> ApprovalState {
        if let deadline = request.deadline, now >= deadline { return .expired }
        return request.state
    }

    /// The time-out transition, when the deadline of a live state has passed.
    public mutating func expireIfDue(at now: Date) -> Transition? {
        guard let deadline = request.deadline, now >= deadline else { return nil }
        return apply(Transition(from: request.state, to: .expired, cause: .timedOut, at: now))
    }

    /// A trusted device of the request's user answers.
    public mutating func respond(
        _ decision: ApprovalDecision,
        numberCode: String?,
        deviceID: String,
        keyBound: Bool = false,
        at now: Date
    ) -> MachineVerdict {
        if let refusal = refusal(unless: .pending, at: now) { return refusal }
        let transition: Transition
        switch decision {
        case .deny:
            transition = Transition(from: .pending, to: .denied, cause: .deniedByDevice, at: now)
        case .approve:
            if let stored = request.numberCode {
                guard let numberCode else { return .refuse(.numberCodeRequired) }
                if NumberCode.matches(numberCode, stored) {
                    transition = Transition(from: .pending, to: .approved, cause: .approvedByDevice, at: now)
                } else {
                    transition = Transition(from: .pending, to: .denied, cause: .numberMismatch, at: now)
                }
            } else {
                transition = Transition(from: .pending, to: .approved, cause: .approvedByDevice, at: now)
            }
        }
        request.respondingDeviceID = deviceID
        request.deviceKeyBound = keyBound
        request.via = .push
        return .persist(apply(transition))
    }

    /// The requester typed a right code: a device's offline code (`deviceID`
    /// is that device) or a bypass code (no device). Such an answer carries no signature.
    public mutating func approveByCode(via: AnswerVia, deviceID: String?, at now: Date) -> MachineVerdict {
        if let refusal = refusal(unless: .pending, at: now) { return refusal }
        request.respondingDeviceID = deviceID
        request.deviceKeyBound = deviceID == nil ? nil : false
        request.via = via
        let cause: TransitionCause = via == .bypassCode ? .approvedByBypassCode : .approvedByOfflineCode
        return .persist(apply(Transition(from: .pending, to: .approved, cause: cause, at: now)))
    }

    /// The request took as many wrong codes as it may: denied.
    public mutating func denyAfterWrongCodes(at now: Date) -> MachineVerdict {
        if let refusal = refusal(unless: .pending, at: now) { return refusal }
        return .persist(apply(Transition(from: .pending, to: .denied, cause: .codesExhausted, at: now)))
    }

    /// The requester carries out the approved action.
    public mutating func complete(at now: Date) -> MachineVerdict {
        if let refusal = refusal(unless: .approved, at: now) { return refusal }
        return .persist(apply(Transition(from: .approved, to: .completed, cause: .completedByRequester, at: now)))
    }

    /// The requester gives up.
    public mutating func cancel(at now: Date) -> MachineVerdict {
        if let refusal = refusal(unless: .pending, at: now) { return refusal }
        return .persist(apply(Transition(from: .pending, to: .cancelled, cause: .cancelledByRequester, at: now)))
    }

    /// A newer request for the same subject and action replaces this one.
    /// Returns `nil` when there is nothing to replace (not pending, or already expired).
    public mutating func supersede(at now: Date) -> Transition? {
        guard state(at: now) == .pending else { return nil }
        return apply(Transition(from: .pending, to: .cancelled, cause: .supersededByNewerRequest, at: now))
    }

    /// The user's password changed another way (an email reset): a live phone
    /// reset is cancelled, so that completing it cannot overwrite the new
    /// password. `nil` when it is not live (or its deadline passed). The stores
    /// ask this of each of the user's phone resets and store the transition, in
    /// the password change's transaction.
    public mutating func cancelForPasswordChange(at now: Date) -> Transition? {
        let current = state(at: now)
        guard current == .pending || current == .approved else { return nil }
        return apply(Transition(from: current, to: .cancelled, cause: .passwordChanged, at: now))
    }

    /// The user was erased, or the integration that asked deleted (`cause`): a live request
    /// (pending, or approved and not yet completed) is cancelled with it, in the same
    /// transaction. `nil` when it is not live (or its deadline passed).
    public mutating func cancelForRemoval(_ cause: TransitionCause, at now: Date) -> Transition? {
        let current = state(at: now)
        guard current == .pending || current == .approved else { return nil }
        return apply(Transition(from: current, to: .cancelled, cause: cause, at: now))
    }

    /// What to answer instead of acting, unless the request is in `required` at `now`:
    /// a time-out to write first when the deadline passed unrecorded, else a refusal.
    private mutating func refusal(unless required: ApprovalState, at now: Date) -> MachineVerdict? {
        let current = state(at: now)
        if current == .expired {
            if let timeOut = expireIfDue(at: now) { return .expire(timeOut) }
            return .refuse(.expired)
        }
        return current == required ? nil : .refuse(.conflict(current))
    }

    private mutating func apply(_ transition: Transition) -> Transition {
        request.state = transition.to
        request.updatedAt = transition.at
        request.version += 1
        if transition.to == .approved {
            request.completeBy = transition.at.addingTimeInterval(request.completionWindow)
        }
        if transition.clearsPasswordHash { request.newPasswordHash = nil }
        return transition
    }
}

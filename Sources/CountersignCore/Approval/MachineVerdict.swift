/// Why an operation was refused without any change.
public enum Refusal: Error, Sendable, Equatable {
    /// The operation is not allowed in the current state (HTTP 409).
    case conflict(ApprovalState)
    /// The request has expired (HTTP 410).
    case expired
    /// Number matching is on and the approval carried no code (HTTP 400); the request stays pending.
    case numberCodeRequired
}

/// What the owner of the machine must do after an event.
public enum MachineVerdict: Sendable, Equatable {
    /// Persist `transition` (conditionally on `transition.from`), then wake waiters and notify.
    case persist(Transition)
    /// Answer with the refusal; nothing changes.
    case refuse(Refusal)
    /// The deadline has passed but the request still holds a live state:
    /// persist this time-out (conditionally, like any transition), then refuse
    /// with ``Refusal/expired``. A reader already sees `expired`; this writes it
    /// now rather than leaving it to the sweeper.
    case expire(Transition)
}

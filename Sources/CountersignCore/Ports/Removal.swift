import Foundation

/// A live request that a removal cancelled in its own transaction (the user erased, or the
/// integration that asked deleted): the broker mirrors it, wakes its long polls.
public struct CancelledRequest: Sendable, Equatable {
    public var id: String
    public var from: ApprovalState
    public var cause: TransitionCause

    public init(id: String, from: ApprovalState, cause: TransitionCause) {
        self.id = id
        self.from = from
        self.cause = cause
    }

    /// The audit event of `transition` on `request` (as it is after it), as the broker writes one.
    public static func auditEvent(_ transition: Transition, _ request: ApprovalRequest) -> AuditEvent {
        TransitionEffects.auditEvent(transition, request, context: .system)
    }
}

/// What erasing a user removed, in one transaction.
public struct ErasedUser: Sendable, Equatable {
    public var userID: String
    public var devices: Int
    /// Its live requests, cancelled (each audited, an integration's with its webhook event queued).
    public var cancelled: [CancelledRequest]
    /// Its audit events, now naming it by the pseudonym.
    public var auditEvents: Int

    public init(userID: String, devices: Int, cancelled: [CancelledRequest], auditEvents: Int) {
        self.userID = userID
        self.devices = devices
        self.cancelled = cancelled
        self.auditEvents = auditEvents
    }
}

/// What deleting an integration ended, in one transaction.
public struct DeletedIntegration: Sendable, Equatable {
    /// Its live approvals, cancelled (audited; no webhook event: the webhook goes with it).
    public var cancelled: [CancelledRequest]
    /// Users it had created: from now on nobody's (they stay, with their devices).
    public var usersReleased: Int
    public var grantsEnded: Int
    /// Its webhook events still waiting, dropped.
    public var eventsDropped: Int

    public init(cancelled: [CancelledRequest], usersReleased: Int, grantsEnded: Int, eventsDropped: Int) {
        self.cancelled = cancelled
        self.usersReleased = usersReleased
        self.grantsEnded = grantsEnded
        self.eventsDropped = eventsDropped
    }
}

/// Removing what a person or a relying service leaves behind.
public protocol RemovalStore: Sendable {
    /// Erases user `userID` in one transaction: its live requests are cancelled (audited, an
    /// integration's webhook event queued), then its devices (keys, sealed offline secrets, used
    /// proofs), bypass codes, grants, enrollment codes, email resets, queued mail, idempotency
    /// records and requests are deleted with the user; its audit events keep their place with the
    /// email replaced by `pseudonym` (in the detail too), and `audit` is appended. `nil` for a
    /// user no longer stored, or (with `ownedBy`) no longer that integration's.
    func eraseUser(userID: String, ownedBy integrationID: String?, pseudonym: String, at: Date, audit: AuditEvent) async throws -> ErasedUser?
    /// Deletes an integration in one transaction: its live approvals are cancelled (audited), its
    /// key, enrollment codes, grants, idempotency records and waiting webhook events end, the users
    /// it created become nobody's, and `audit` is appended. `nil` for an unknown id.
    func deleteIntegration(id: String, at: Date, audit: AuditEvent) async throws -> DeletedIntegration?
}

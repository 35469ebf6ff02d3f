import Foundation

/// Email reset tickets. Every change is one conditional update, so that
/// concurrent verifies cannot both win and parallel guesses cannot pass the
/// try limit.
public protocol EmailResetStore: Sendable {
    /// Stores `ticket`, replacing every active ticket of the same address
    /// (their unsent mails are dropped), and queues `mail` when given: one
    /// transaction. Returns how many tickets were replaced and the ids of the mails dropped.
    func issueEmailReset(_ ticket: EmailResetTicket, mail: OutboxItem?) async throws -> (replaced: Int, droppedMails: [String])
    /// The newest active ticket of an address.
    func activeEmailReset(email: String) async throws -> EmailResetTicket?
    func emailReset(tokenHash: String) async throws -> EmailResetTicket?
    /// Counts one try on a ticket that is active, unexpired at `now` and has
    /// fewer than `maxTries`; returns the try's number, or `nil` when none is left.
    func takeEmailResetTry(id: String, maxTries: Int, now: Date) async throws -> Int?
    /// Gives back a try whose check never ran to its end (the hashing queue was full).
    func returnEmailResetTry(id: String) async throws
    /// Uses the active, unexpired ticket up, sets its user's password and
    /// cancels the user's live phone resets (``ApprovalStateMachine/cancelForPasswordChange(at:)``,
    /// audited), in one transaction: what it cancelled, for the one caller
    /// that did it; `nil` for the others.
    func redeemEmailReset(id: String, passwordHash: String, now: Date) async throws -> [CancelledReset]?
}

/// A phone reset that a password change cancelled: the request, and the state it left.
public struct CancelledReset: Sendable, Equatable {
    public var id: String
    public var from: ApprovalState

    public init(id: String, from: ApprovalState) {
        self.id = id
        self.from = from
    }

    /// The trail's event of it; `by` names how the password changed.
    public static func auditEvent(_ id: String, userID: String, at: Date, by path: String = "email reset") -> AuditEvent {
        AuditEvent(
            at: at, kind: .cancelled, userID: userID, requestRef: ApprovalRequest.logReference(of: id),
            detail: "password changed by \(path)")
    }
}

import Foundation
import Synchronization

/// A pending request that a newer one of its subject and action cancelled, in
/// the newer one's insert: the transition, and the request as it left it.
public struct Supersession: Sendable, Equatable {
    public var transition: Transition
    public var request: ApprovalRequest

    public init(transition: Transition, request: ApprovalRequest) {
        self.transition = transition
        self.request = request
    }

    /// The cancellation of `old` at `now`, as the state machine decides it; `nil` when it is not pending then.
    public static func of(_ old: ApprovalRequest, at now: Date) -> Supersession? {
        var machine = ApprovalStateMachine(old)
        guard let transition = machine.supersede(at: now) else { return nil }
        return Supersession(transition: transition, request: machine.request)
    }
}

/// Durable home of approval requests. Every method is one transaction.
public protocol ApprovalStore: Sendable {
    /// Inserts `request` and, in the same transaction, cancels every other
    /// request of the same subject and action that is still pending at
    /// `request.createdAt` (``TransitionCause/supersededByNewerRequest``).
    /// Doing both in one transaction keeps "one pending request per subject"
    /// true however many initiations race. Returns the cancellations it made,
    /// each decided once (``ApprovalStateMachine/supersede(at:)``) and written:
    /// the caller owes each its side effects (audit, waking its long polls, the
    /// resolution push), whatever its own index holds.
    ///
    /// Also in that transaction: `supersededEvent` of each cancellation, queued
    /// in the outbox if its integration has a webhook, and `idempotency` stored;
    /// a key already stored throws ``IdempotencyKeyTaken`` and writes nothing.
    func insert(
        _ request: ApprovalRequest, idempotency: IdempotencyRecord?, supersededEvent: @escaping @Sendable (Supersession) -> OutboxItem?
    ) async throws -> [Supersession]
    func request(id: String) async throws -> ApprovalRequest?
    /// Requests in a live state (pending or approved), for the broker's index,
    /// handed to `body` a batch at a time as they are read (batches may come
    /// from more than one thread at once), without a reset's new password hash:
    /// no transition reads it from memory, and the one that uses it reads the row.
    func liveRequests(_ body: @escaping @Sendable ([ApprovalRequest]) -> Void) async throws
    /// Pending requests of a user, not yet past their deadline at `now`, newest first.
    func pendingRequests(userID: String, now: Date) async throws -> [ApprovalRequest]
    /// Live requests whose deadline has passed at `now` (at most `limit`).
    func dueRequests(now: Date, limit: Int) async throws -> [ApprovalRequest]
    /// Counts of live requests by state.
    func liveCounts() async throws -> [ApprovalState: Int]
    /// Whether other processes change this database too (a cluster): the
    /// broker then reads every request from it instead of keeping an index.
    var isShared: Bool { get }
    /// Persists `request` as the result of `transition` only if the row still
    /// holds `transition.from` and that state's deadline has not passed (for a
    /// time-out: has passed) at `writeTime()`, read inside the transaction: the
    /// moment of the write, not of the decision, which may have waited for the
    /// writer. Counts the transition in the row's version.
    /// The row's held password hash is never written from `request` (the
    /// broker's copies do not carry it): it is kept, or cleared when
    /// `transition` finishes the request (``Transition/clearsPasswordHash``).
    /// Completing a password reset also sets the user's password from the held
    /// hash, and `event` is queued in the outbox if the request's integration
    /// has a webhook, and `audit` is appended to the audit trail (an answer
    /// signed by a device key: its proof must last as long as the transition),
    /// all in the same transaction. Returns whether this call won.
    func apply(
        _ transition: Transition, to request: ApprovalRequest, event: OutboxItem?, audit: AuditEvent?,
        writeTime: @escaping @Sendable () -> Date
    ) async throws -> Bool
}

extension ApprovalStore {
    /// Every live request at once (``liveRequests(_:)``), in no particular order.
    public func liveRequests() async throws -> [ApprovalRequest] {
        let collected = Mutex<[ApprovalRequest]>([])
        try await liveRequests { batch in collected.withLock { $0.append(contentsOf: batch) } }
        return collected.withLock { $0 }
    }
}

import CountersignCore
import Foundation

extension EmailResetTicket {
    @inlinable public init(row: some SQLRow) throws {
        self.init(
            id: try row.get("id"), userID: try row.get("user_id"), email: try row.get("email"), codeHash: try row.get("code_hash"),
            tokenHash: try row.get("token_hash"), createdAt: try row.get("created_at"), expiresAt: try row.get("expires_at"),
            tries: try row.get("tries"), state: State(rawValue: try row.get("state")) ?? .replaced)
    }
}

extension CancelledReset {
    /// Cancels a phone reset because the user's password changed another way, as the state machine
    /// decides (``ApprovalStateMachine/cancelForPasswordChange(at:)``): the statement that stores it, or
    /// `nil` when the request is no longer live.
    public static func cancellation(of request: ApprovalRequest, at now: Date) -> (CancelledReset, SQLStatement)? {
        var machine = ApprovalStateMachine(request)
        guard let change = machine.cancelForPasswordChange(at: now),
            let update = ApprovalSQL.transition(change, of: machine.request, writtenAt: now)
        else { return nil }
        return (CancelledReset(id: request.id, from: change.from), update)
    }
}

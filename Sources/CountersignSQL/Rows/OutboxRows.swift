import CountersignCore
import Foundation

extension OutboxItem {
    /// `nil` for a kind this version does not know (written by a newer one), or an item with no payload left.
    @inlinable public init?(row: some SQLRow) throws {
        guard let kind = OutboxKind(rawValue: try row.get("kind")), let payload = try row.get("payload", as: Data?.self) else { return nil }
        self.init(
            id: try row.get("id"), kind: kind, reference: try row.get("reference"), userID: try row.get("user_id"), payload: payload,
            createdAt: try row.get("created_at"), nextAttemptAt: try row.get("next_attempt_at"), deadline: try row.get("deadline"),
            attempts: try row.get("attempts"), integrationID: try row.get("integration_id"))
    }
}

import CountersignCore
import Foundation

extension AuditEvent {
    /// `nil` for a kind this version does not know (written by a newer one). The email is the event's own,
    /// else its user's (column `user_email` of the join).
    @inlinable public init?(row: some SQLRow) throws {
        guard let kind = AuditKind(rawValue: try row.get("kind")) else { return nil }
        self.init(
            at: try row.get("at"), kind: kind, userID: try row.get("user_id"),
            email: try row.get("email", as: String?.self) ?? row.get("user_email", as: String?.self), deviceID: try row.get("device_id"),
            requestRef: try row.get("request_ref"), detail: try row.get("detail"), proof: try row.get("proof"), proofKey: try row.get("proof_key"))
        ip = try row.get("ip")
        userAgent = try row.get("user_agent")
    }
}

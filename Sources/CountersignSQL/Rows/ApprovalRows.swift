import CountersignCore
import Foundation

/// A row whose state, action or stored form this version cannot read.
public struct CorruptRow: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

extension ApprovalRequest {
    @inlinable public init(row: some SQLRow) throws {
        let salt = try row.get("number_code_salt", as: String?.self)
        let hash = try row.get("number_code_hash", as: String?.self)
        guard let state = ApprovalState(rawValue: try row.get("state")), let action = ApprovalAction(rawValue: try row.get("action")) else {
            throw CorruptRow("approval request row with unknown state or action")
        }
        self.init(
            id: try row.get("id"),
            userID: try row.get("user_id"),
            subject: try row.get("subject"),
            action: action,
            state: state,
            createdAt: try row.get("created_at"),
            expiresAt: try row.get("expires_at"),
            completionWindow: try row.get("completion_window"),
            completeBy: try row.get("complete_by"),
            updatedAt: try row.get("updated_at"),
            numberCode: salt.flatMap { salt in hash.map { NumberCode.Stored(salt: salt, hash: $0) } },
            newPasswordHash: try row.get("new_password_hash"),
            requester: RequesterInfo(ip: try row.get("requester_ip"), userAgent: try row.get("requester_user_agent")),
            respondingDeviceID: try row.get("responding_device_id"),
            deviceKeyBound: try row.get("device_key_bound"),
            via: (try row.get("answered_via", as: String?.self)).flatMap(AnswerVia.init(rawValue:)),
            prompt: try (try row.get("prompt", as: String?.self)).map(ApprovalPrompt.init(storedJSON:)),
            version: try row.get("version")
        )
    }
}

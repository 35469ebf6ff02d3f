import CountersignCore
import Foundation

/// A row whose state, action or stored form this version cannot read.
public struct CorruptRow: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

extension ApprovalRequest {
    /// - Parameter withPasswordHash: whether to read a reset's new password hash (the broker's
    ///   index holds requests without it).
    @inlinable public init(row: some SQLRow, withPasswordHash: Bool = true) throws {
        // Read in the table's column order (a SQLite row finds each after the one before).
        let id: String = try row.get("id")
        let userID: String? = try row.get("user_id")
        let subject: String = try row.get("subject")
        let action = ApprovalAction(rawValue: try row.get("action"))
        let state = ApprovalState(rawValue: try row.get("state"))
        guard let state, let action else { throw CorruptRow("approval request row with unknown state or action") }
        let createdAt: Date = try row.get("created_at")
        let expiresAt: Date = try row.get("expires_at")
        let completionWindow: TimeInterval = try row.get("completion_window")
        let completeBy: Date? = try row.get("complete_by")
        let updatedAt: Date = try row.get("updated_at")
        let salt = try row.get("number_code_salt", as: String?.self)
        let hash = try row.get("number_code_hash", as: String?.self)
        let newPasswordHash: String? = withPasswordHash ? try row.get("new_password_hash") : nil
        let requester = RequesterInfo(ip: try row.get("requester_ip"), userAgent: try row.get("requester_user_agent"))
        let respondingDeviceID: String? = try row.get("responding_device_id")
        let version: Int = try row.get("version")
        let prompt = try (try row.get("prompt", as: String?.self)).map(ApprovalPrompt.init(storedJSON:))
        let deviceKeyBound: Bool? = try row.get("device_key_bound")
        let via = (try row.get("answered_via", as: String?.self)).flatMap(AnswerVia.init(rawValue:))
        self.init(
            id: id, userID: userID, subject: subject, action: action, state: state, createdAt: createdAt, expiresAt: expiresAt,
            completionWindow: completionWindow, completeBy: completeBy, updatedAt: updatedAt,
            numberCode: salt.flatMap { salt in hash.map { NumberCode.Stored(salt: salt, hash: $0) } },
            newPasswordHash: newPasswordHash, requester: requester, respondingDeviceID: respondingDeviceID,
            deviceKeyBound: deviceKeyBound, via: via, prompt: prompt, version: version
        )
    }
}

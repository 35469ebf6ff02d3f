import Foundation

/// One push to carry out; the dispatcher finds the devices.
public enum PushJob: Sendable, Equatable {
    /// A new request: prompt every push-enabled device of the user. `prompt`
    /// is what an integration asked to show (title, body, context, its name).
    case prompt(
        requestID: String, userID: String, action: ApprovalAction, expiresAt: Date, requester: RequesterInfo, prompt: ApprovalPrompt? = nil)
    /// The request left pending: tell the devices to drop the prompt.
    case resolved(requestID: String, userID: String, status: ApprovalState)
    /// A device joined the user: tell every other device (no secret, not the new one's key or token).
    case deviceAdded(userID: String, deviceID: String, deviceName: String, platform: String, at: Date)
    /// The user typed too many wrong codes today: every code is refused until the window ends or the operator unlocks.
    case codesLocked(userID: String)

    /// The request, named as logs and the audit trail name it.
    public var requestRef: String? {
        switch self {
        case .prompt(let id, _, _, _, _, _), .resolved(let id, _, _): ApprovalRequest.logReference(of: id)
        case .deviceAdded, .codesLocked: nil
        }
    }

    /// The device the message is not for (the one it tells of).
    public var excludedDeviceID: String? {
        if case .deviceAdded(_, let deviceID, _, _, _) = self { return deviceID }
        return nil
    }

    /// The `type` data value of the message.
    public var type: String {
        switch self {
        case .prompt: "approval_request"
        case .resolved: "approval_resolved"
        case .deviceAdded: "device_added"
        case .codesLocked: "codes_locked"
        }
    }

    /// Whose devices get the message.
    public var userID: String {
        switch self {
        case .prompt(_, let userID, _, _, _, _), .resolved(_, let userID, _), .deviceAdded(let userID, _, _, _, _), .codesLocked(let userID): userID
        }
    }
}

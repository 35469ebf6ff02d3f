import Foundation

/// One push to carry out; the dispatcher finds the devices.
public enum PushJob: Sendable, Equatable {
    /// A new request: prompt every push-enabled device of the user. `prompt`
    /// is what an integration asked to show (title, body, context, its name).
    case prompt(
        requestID: String, userID: String, action: ApprovalAction, expiresAt: Date, requester: RequesterInfo, prompt: ApprovalPrompt? = nil)
    /// The request left pending: tell the devices to drop the prompt.
    case resolved(requestID: String, userID: String, status: ApprovalState)

    /// The request, named as logs and the audit trail name it.
    public var requestRef: String {
        switch self {
        case .prompt(let id, _, _, _, _, _), .resolved(let id, _, _): ApprovalRequest.logReference(of: id)
        }
    }

    /// The `type` data value of the message.
    public var type: String {
        switch self {
        case .prompt: "approval_request"
        case .resolved: "approval_resolved"
        }
    }

    /// Whose devices get the message.
    public var userID: String {
        switch self {
        case .prompt(_, let userID, _, _, _, _), .resolved(_, let userID, _): userID
        }
    }
}

import Foundation

/// One approval request, as stored. Secrets are held only as hashes:
/// `numberCode` (a salted SHA-256) and `newPasswordHash` (bcrypt).
public struct ApprovalRequest: Sendable, Equatable {
    /// Opaque, 16 CSPRNG bytes base64url-encoded: the requester's only credential.
    public var id: String
    /// The account the request is for; `nil` for a request made for an unknown
    /// email, which looks the same from outside but can never be approved.
    public var userID: String?
    /// Groups the requests that replace each other: the user id, or a hash of
    /// an unknown email, so that both behave alike.
    public var subject: String
    public var action: ApprovalAction
    public var state: ApprovalState
    public var createdAt: Date
    public var expiresAt: Date
    /// How long the requester has to complete once approved.
    public var completionWindow: TimeInterval
    /// Set when approved: the deadline for completion.
    public var completeBy: Date?
    /// When the request left `pending` or `approved` for a terminal state, or was approved.
    public var updatedAt: Date
    /// Salted hash of the number code; `nil` when number matching is off.
    public var numberCode: NumberCode.Stored?
    /// bcrypt hash of the password to set on completion; cleared once terminal.
    public var newPasswordHash: String?
    public var requester: RequesterInfo
    /// The device that approved or denied.
    public var respondingDeviceID: String?
    /// Whether that device's answer was signed with its device key.
    public var deviceKeyBound: Bool?
    /// How it was answered (approved or denied by someone); `nil` until then.
    public var via: AnswerVia?
    /// What an integration asked to show; `nil` for the phone reset.
    public var prompt: ApprovalPrompt? {
        get { promptBox?.prompt }
        set { promptBox = newValue.map(PromptBox.init) }
    }
    /// Held out of line: the broker keeps every live request in memory, and
    /// most (every phone reset) have no prompt to take up room for.
    private var promptBox: PromptBox?
    /// How many transitions the request has been through: a row with a higher
    /// version is newer than one with a lower.
    public var version: Int

    public init(
        id: String,
        userID: String?,
        subject: String,
        action: ApprovalAction,
        state: ApprovalState,
        createdAt: Date,
        expiresAt: Date,
        completionWindow: TimeInterval,
        completeBy: Date? = nil,
        updatedAt: Date,
        numberCode: NumberCode.Stored?,
        newPasswordHash: String?,
        requester: RequesterInfo,
        respondingDeviceID: String? = nil,
        deviceKeyBound: Bool? = nil,
        via: AnswerVia? = nil,
        prompt: ApprovalPrompt? = nil,
        version: Int = 0
    ) {
        self.id = id
        self.userID = userID
        self.subject = subject
        self.action = action
        self.state = state
        self.createdAt = createdAt
        self.expiresAt = expiresAt
        self.completionWindow = completionWindow
        self.completeBy = completeBy
        self.updatedAt = updatedAt
        self.numberCode = numberCode
        self.newPasswordHash = newPasswordHash
        self.requester = requester
        self.respondingDeviceID = respondingDeviceID
        self.deviceKeyBound = deviceKeyBound
        self.via = via
        self.promptBox = prompt.map(PromptBox.init)
        self.version = version
    }

    /// The moment the current live state ends by itself, if it is live.
    public var deadline: Date? {
        switch state {
        case .pending: expiresAt
        case .approved: completeBy
        default: nil
        }
    }

    public var numberMatching: Bool { numberCode != nil }

    /// The integration that owns the request; `nil` for the phone reset.
    public var integrationID: String? { prompt?.integrationID }
}

extension ApprovalRequest {
    /// Whom the request was made for.
    public var recipient: Recipient { Recipient(approverID: userID, subject: subject) }

    /// The request id is the requester's credential: logs carry a short hash of it instead.
    public var logReference: String { Self.logReference(of: id) }

    public static func logReference(of id: String) -> String {
        String(SecureToken.sha256Hex(id).prefix(12))
    }
}

/// An integration's prompt, out of line (see ``ApprovalRequest/prompt``); replaced, never changed.
private final class PromptBox: Sendable, Equatable {
    let prompt: ApprovalPrompt

    init(_ prompt: ApprovalPrompt) {
        self.prompt = prompt
    }

    static func == (lhs: PromptBox, rhs: PromptBox) -> Bool {
        lhs.prompt == rhs.prompt
    }
}

/// A request's identity before it is made (``ApprovalBroker/draft(ttl:numberMatching:)``).
public struct ApprovalDraft: Sendable, Equatable {
    /// The request id, the requester's credential.
    public var id: String
    /// The number the requester shows, when matching is on (stored only as a salted hash).
    public var numberCode: String?
    public var createdAt: Date
    /// When it stops being pending.
    public var expiresAt: Date
}

/// The life of an approval request. The only transitions are those of
/// ``ApprovalStateMachine``; see the table in `docs/openapi.yaml` and the README.
public enum ApprovalState: String, Sendable, Codable, CaseIterable {
    /// Waiting for a trusted device to answer; ends at `expiresAt`.
    case pending
    /// A trusted device approved; the requester may complete until `completeBy`.
    case approved
    /// A trusted device denied, or sent a wrong number code. Terminal.
    case denied
    /// `expiresAt` (pending) or `completeBy` (approved) passed. Terminal.
    case expired
    /// The requester cancelled, or a newer request for the same subject replaced it. Terminal.
    case cancelled
    /// The approved action was carried out, exactly once. Terminal.
    case completed

    /// A live request can still change; a terminal one never does.
    public var isLive: Bool { self == .pending || self == .approved }
}

/// What the approval is for. Only password resets exist today; the type keeps
/// the `action` field of the API and the push payload honest.
public enum ApprovalAction: String, Sendable, Codable, CaseIterable {
    case passwordReset = "password_reset"
}

/// An approving device's answer.
public enum ApprovalDecision: String, Sendable, Codable, CaseIterable {
    case approve
    case deny
}

/// Whom a new request is for, as the broker decided it. From outside the three
/// look the same (same answer, same request life); only a `user` request
/// prompts devices and can be approved.
public enum Recipient: Sendable, Equatable {
    /// A known user: their trusted devices are prompted and may answer.
    case user(id: String)
    /// A known user whose prompts a fraud report silenced: no device sees the
    /// request, which expires unanswered.
    case silenced(userID: String)
    /// No account has this email: the request expires unanswered.
    case unknownEmail(emailHash: String)

    /// The user whose devices may approve: only an unsilenced user.
    public var approverID: String? {
        if case .user(let id) = self { return id }
        return nil
    }

    /// The account the audit trail names, when there is one.
    public var accountID: String? {
        switch self {
        case .user(let id), .silenced(let id): id
        case .unknownEmail: nil
        }
    }

    /// What newer requests replace, so that a second initiate behaves the same
    /// for all three: the user id, or a hash of the unknown email.
    public var subject: String {
        switch self {
        case .user(let id), .silenced(let id): id
        case .unknownEmail(let hash): Self.unknownSubjectPrefix + hash
        }
    }

    /// The recipient a stored request was made for: the inverse of
    /// ``approverID`` and ``subject``, the only place that reads a subject.
    public init(approverID: String?, subject: String) {
        if let approverID {
            self = .user(id: approverID)
        } else if subject.hasPrefix(Self.unknownSubjectPrefix) {
            self = .unknownEmail(emailHash: String(subject.dropFirst(Self.unknownSubjectPrefix.count)))
        } else {
            self = .silenced(userID: subject)
        }
    }

    static let unknownSubjectPrefix = "unknown:"
}

/// The life of an approval request. The only transitions are those of
/// ``ApprovalStateMachine``; see the table in `docs/openapi.yaml` and `docs/phone-app.md`.
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

/// What the approval is for: `password_reset` for the phone reset, or a name
/// an integration chose (`[a-z0-9_.-]{1,64}`, e.g. `login`, `payout`).
public struct ApprovalAction: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
    public let rawValue: String

    /// Any stored or well-formed name; see ``isWellFormed(_:)`` for what the API accepts.
    public init?(rawValue: String) {
        guard Self.isWellFormed(rawValue) else { return nil }
        self.rawValue = rawValue
    }

    /// The phone reset of the mobile contract: completing it sets the held password.
    public static let passwordReset = ApprovalAction(rawValue: "password_reset")!

    public var description: String { rawValue }

    /// `[a-z0-9_.-]{1,64}`.
    public static func isWellFormed(_ text: String) -> Bool {
        (1...64).contains(text.utf8.count)
            && text.utf8.allSatisfy { c in (c >= 0x61 && c <= 0x7A) || (c >= 0x30 && c <= 0x39) || c == 0x5F || c == 0x2E || c == 0x2D }
    }

    public init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        guard let action = ApprovalAction(rawValue: text) else {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "not an action name"))
        }
        self = action
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }
}

/// An approving device's answer.
public enum ApprovalDecision: String, Sendable, Codable, CaseIterable {
    case approve
    case deny
}

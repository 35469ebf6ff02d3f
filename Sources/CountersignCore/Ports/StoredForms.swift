import Foundation

/// How both backends store what is not a plain column, so that a row written
/// by one reads the same on the other (`countersign migrate` copies it as is).
extension ApprovalPrompt {
    /// The prompt as stored: JSON text with sorted keys.
    public func storedJSON() throws -> String {
        String(decoding: try Self.storedEncoder.encode(self), as: UTF8.self)
    }

    public init(storedJSON: String) throws {
        self = try JSONDecoder().decode(Self.self, from: Data(storedJSON.utf8))
    }

    private static let storedEncoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return encoder
    }()
}

/// The condition a transition's conditional update adds to `WHERE id = ? AND state = ?`:
/// the request's deadline column, and whether the write must come after it
/// (a time-out) or before it (anything else). Terminal states never change: `nil`.
public struct DeadlineCheck: Sendable, Equatable {
    /// `expires_at` while pending, `complete_by` once approved.
    public var column: String
    /// SQL comparison of the column with the write time: `<=` for a time-out, else `>`.
    public var comparison: String

    public init?(_ transition: Transition) {
        switch transition.from {
        case .pending: column = "expires_at"
        case .approved: column = "complete_by"
        default: return nil
        }
        comparison = transition.cause == .timedOut ? "<=" : ">"
    }
}

extension Transition {
    /// Whether this transition ends the held password hash: nothing can be
    /// done with it once the request has finished. The one rule for both
    /// copies: ``ApprovalStateMachine`` clears the request's by it, the stores
    /// the row's (an update never writes the hash itself: after the insert the
    /// row is the only place it is held).
    public var clearsPasswordHash: Bool { !to.isLive }

    /// Whether committing this transition sets `request`'s user's password (a phone reset completed).
    public func setsPassword(of request: ApprovalRequest) -> Bool {
        to == .completed && request.action == .passwordReset && request.integrationID == nil
    }
}

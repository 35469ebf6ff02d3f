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

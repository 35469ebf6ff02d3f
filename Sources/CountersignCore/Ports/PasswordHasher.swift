/// Slow, salted password hashing (bcrypt). Implementations keep the work off event loops.
public protocol PasswordHasher: Sendable {
    func hash(_ password: String) async throws -> String
    func verify(_ password: String, hash: String) async throws -> Bool
    /// Whether a hash that just verified should be made again (it was made at another cost).
    func needsRehash(_ hash: String) -> Bool
}

extension PasswordHasher {
    public func needsRehash(_ hash: String) -> Bool { false }
}

/// The hashing queue is full: answer 503 `unavailable` and let the client retry,
/// rather than queue CPU work without bound.
public struct HashingQueueFull: Error, Equatable {
    public init() {}
}

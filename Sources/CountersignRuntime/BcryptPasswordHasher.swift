import CountersignCore
import HummingbirdBcrypt
import NIOPosix

/// bcrypt on NIO's blocking thread pool, so hashing never stalls an event loop
/// or the cooperative pool, behind a bounded gate: past `maxQueued` jobs
/// running or waiting, a call fails at once with ``HashingQueueFull``.
public struct BcryptPasswordHasher: PasswordHasher {
    public let cost: Int
    private let gate: WorkGate

    public static let costRange = 4...31
    /// The default bound on bcrypt jobs running or waiting at once.
    public static let defaultMaxQueued = 32

    public init(cost: Int, maxQueued: Int = defaultMaxQueued) {
        precondition(Self.costRange.contains(cost), "bcrypt cost out of range")
        self.cost = cost
        self.gate = WorkGate(capacity: maxQueued)
    }

    public func hash(_ password: String) async throws -> String {
        let cost = UInt8(cost)
        return try await gate.run { try await NIOThreadPool.singleton.runIfActive { Bcrypt.hash(password, cost: cost) } }
    }

    public func verify(_ password: String, hash: String) async throws -> Bool {
        try await gate.run { try await NIOThreadPool.singleton.runIfActive { Bcrypt.verify(password, hash: hash) } }
    }
}

import CountersignCore
import HummingbirdBcrypt
import NIOPosix

/// bcrypt on NIO's blocking thread pool, so hashing never stalls an event loop
/// or the cooperative pool.
public struct BcryptPasswordHasher: PasswordHasher {
    public let cost: Int

    public static let costRange = 4...31

    public init(cost: Int) {
        precondition(Self.costRange.contains(cost), "bcrypt cost out of range")
        self.cost = cost
    }

    public func hash(_ password: String) async throws -> String {
        let cost = UInt8(cost)
        return try await NIOThreadPool.singleton.runIfActive { Bcrypt.hash(password, cost: cost) }
    }

    public func verify(_ password: String, hash: String) async throws -> Bool {
        try await NIOThreadPool.singleton.runIfActive { Bcrypt.verify(password, hash: hash) }
    }
}

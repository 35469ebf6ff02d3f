import CountersignCore
import HummingbirdBcrypt
import NIOPosix
import Synchronization

/// bcrypt on NIO's blocking thread pool, so hashing never stalls an event loop
/// or the cooperative pool, behind a bounded gate: past `maxQueued` jobs
/// running or waiting, a call fails at once with ``HashingQueueFull``.
///
/// Verifying a hash made at a lower cost than `checkCost` (a user who has not
/// logged in since the cost was raised) is padded with decoy work up to
/// `checkCost`, so that a failed login takes as long for that user as for an
/// unknown email, checked against a decoy at `checkCost`. A login rehashes a
/// hash of another cost at `cost`.
public struct BcryptPasswordHasher: PasswordHasher {
    public let cost: Int
    /// What every check costs at least: `cost`, or the costliest hash stored
    /// when that is dearer (a login of its user must not stand out).
    public let checkCost: Int
    private let gate: WorkGate
    private let decoys = Decoys()

    public static let costRange = 4...31
    /// The default bound on bcrypt jobs running or waiting at once.
    public static let defaultMaxQueued = 32

    public init(cost: Int, maxQueued: Int = defaultMaxQueued, checkCost: Int? = nil) {
        precondition(Self.costRange.contains(cost), "bcrypt cost out of range")
        self.cost = cost
        self.checkCost = max(cost, checkCost.map { min($0, Self.costRange.upperBound) } ?? cost)
        self.gate = WorkGate(capacity: maxQueued)
    }

    /// A hash of nothing anyone knows, at ``checkCost``: what an unknown email
    /// (or a user without a password) is checked against.
    public func decoyHash() async throws -> String {
        let cost = UInt8(checkCost)
        return try await gate.run { try await NIOThreadPool.singleton.runIfActive { Bcrypt.hash(SecureToken.apiKey(), cost: cost) } }
    }

    public func needsRehash(_ hash: String) -> Bool { Self.cost(of: hash) != cost }

    public func hash(_ password: String) async throws -> String {
        let cost = UInt8(cost)
        return try await gate.run { try await NIOThreadPool.singleton.runIfActive { Bcrypt.hash(password, cost: cost) } }
    }

    public func verify(_ password: String, hash: String) async throws -> Bool {
        let padding = Self.paddingCosts(forHashCost: Self.cost(of: hash), configured: checkCost)
        let decoys = decoys
        return try await gate.run {
            try await NIOThreadPool.singleton.runIfActive {
                let matches = Bcrypt.verify(password, hash: hash)
                for cost in padding { _ = Bcrypt.verify(password, hash: decoys.hash(cost: cost)) }
                return matches
            }
        }
    }

    /// The costs of the decoy checks that bring a check at `hashCost` up to
    /// the work of one at `configured`: 2^c + 2^c + 2^(c+1) + … + 2^(C-1) = 2^C.
    public static func paddingCosts(forHashCost hashCost: Int?, configured: Int) -> [Int] {
        guard let hashCost, costRange.contains(hashCost), hashCost < configured else { return [] }
        return Array(hashCost..<configured)
    }

    /// The cost a bcrypt hash was made with (`$2b$12$…` → 12).
    public static func cost(of hash: String) -> Int? {
        let parts = hash.split(separator: "$", omittingEmptySubsequences: true)
        guard parts.count >= 2, parts[0].hasPrefix("2") else { return nil }
        return Int(parts[1])
    }

    /// One decoy hash per cost, made the first time that cost is needed (on the thread pool).
    final class Decoys: Sendable {
        private let byCost = Mutex<[Int: String]>([:])

        func hash(cost: Int) -> String {
            if let known = byCost.withLock({ $0[cost] }) { return known }
            let made = Bcrypt.hash(SecureToken.apiKey(), cost: UInt8(cost))
            byCost.withLock { $0[cost] = $0[cost] ?? made }
            return made
        }
    }
}

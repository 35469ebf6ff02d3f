import Crypto
import Foundation
import Synchronization

/// Proofs of possession already used on this node, for as long as they could
/// still pass the freshness check: a proof works once, so a captured one
/// cannot be replayed as `previousProof` after the change it made.
public final class SeenProofs: Sendable {
    private let seen = Mutex<[Data: Date]>([:])

    public init() {}

    /// Records every proof in `proofs`; `false` (and nothing recorded) when any was used before.
    public func firstUse(_ proofs: [String], now: Date) -> Bool {
        let digests = proofs.map { Data(SHA256.hash(data: Data($0.utf8))) }
        return seen.withLock { seen in
            seen = seen.filter { $0.value > now }
            guard digests.allSatisfy({ seen[$0] == nil }) else { return false }
            for digest in digests { seen[digest] = now.addingTimeInterval(2 * PossessionProof.maxSkew) }
            return true
        }
    }
}

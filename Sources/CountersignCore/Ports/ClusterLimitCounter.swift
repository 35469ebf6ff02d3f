import Foundation

/// Rate-limit counters kept where every node of a cluster counts: one
/// round trip per check, so two nodes cannot each admit a full limit.
public protocol ClusterLimitCounter: Sendable {
    /// Counts an attempt for `key` under `name` unless `limit` is reached in
    /// its window; also says when that window opened.
    func reserve(
        _ name: RateLimitName, key: String, limit: RateLimit, now: Date
    ) async throws -> (
        admission: WindowCounter.Admission, windowOpened: Date
    )
    /// Takes back a reserved attempt, if its window is still the one it was counted in.
    func refund(_ name: RateLimitName, _ reservation: WindowCounter.Reservation) async throws
}

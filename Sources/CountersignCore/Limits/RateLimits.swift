import Foundation

/// One limiter per named limit.
public struct RateLimits: Sendable {
    private let limiters: [RateLimitName: RateLimiter]
    /// Where a cluster counts (every node the same counters); `nil`: this node's memory.
    /// The local limiters then only keep the refusal reports.
    public let shared: (any SharedRateCounter)?
    /// The time windows are counted in (the daemon's clock).
    public let now: @Sendable () -> Date

    public init(
        _ limits: [RateLimitName: RateLimit] = [:], capacity: Int = 50_000, shared: (any SharedRateCounter)? = nil,
        now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.shared = shared
        self.now = now
        var limiters: [RateLimitName: RateLimiter] = [:]
        for name in RateLimitName.allCases {
            limiters[name] = RateLimiter(limit: limits[name] ?? name.defaultLimit, capacity: capacity)
        }
        self.limiters = limiters
    }

    public subscript(_ name: RateLimitName) -> RateLimiter { limiters[name]! }

    /// The refusal reports of every limit (see ``RateLimiter/takeReports(now:includingOpenWindows:)``).
    public func takeReports(now: Date? = nil, includingOpenWindows: Bool = false) -> [(name: RateLimitName, report: RateLimiter.Report)] {
        let now = now ?? self.now()
        return RateLimitName.allCases.flatMap { name in
            self[name].takeReports(now: now, includingOpenWindows: includingOpenWindows).map { (name, $0) }
        }
    }
}

import Foundation

/// One limiter per named limit.
public struct LimitCounters: Sendable {
    private let limiters: [RateLimitName: WindowCounter]
    /// Where a cluster counts (every node the same counters); `nil`: this node's memory.
    /// The local limiters then only keep the refusal reports.
    public let shared: (any ClusterLimitCounter)?
    /// The time windows are counted in (the daemon's clock).
    public let now: @Sendable () -> Date

    public init(
        _ limits: [RateLimitName: RateLimit] = [:], capacity: Int = 50_000, shared: (any ClusterLimitCounter)? = nil,
        now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.shared = shared
        self.now = now
        var limiters: [RateLimitName: WindowCounter] = [:]
        for name in RateLimitName.allCases {
            limiters[name] = WindowCounter(limit: limits[name] ?? name.defaultLimit, capacity: capacity)
        }
        self.limiters = limiters
    }

    public subscript(_ name: RateLimitName) -> WindowCounter { limiters[name]! }

    /// The refusal reports of every limit (see ``WindowCounter/takeReports(now:includingOpenWindows:)``).
    public func takeReports(now: Date? = nil, includingOpenWindows: Bool = false) -> [(name: RateLimitName, report: WindowCounter.Report)] {
        let now = now ?? self.now()
        return RateLimitName.allCases.flatMap { name in
            self[name].takeReports(now: now, includingOpenWindows: includingOpenWindows).map { (name, $0) }
        }
    }
}

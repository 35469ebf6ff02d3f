import Foundation

/// One limiter per named limit.
public struct RateLimits: Sendable {
    private let limiters: [RateLimitName: RateLimiter]

    public init(_ limits: [RateLimitName: RateLimit] = [:], capacity: Int = 50_000) {
        var limiters: [RateLimitName: RateLimiter] = [:]
        for name in RateLimitName.allCases {
            limiters[name] = RateLimiter(limit: limits[name] ?? name.defaultLimit, capacity: capacity)
        }
        self.limiters = limiters
    }

    public subscript(_ name: RateLimitName) -> RateLimiter { limiters[name]! }

    /// The refusal reports of every limit (see ``RateLimiter/takeReports(now:includingOpenWindows:)``).
    public func takeReports(now: Date = Date(), includingOpenWindows: Bool = false) -> [(name: RateLimitName, report: RateLimiter.Report)] {
        RateLimitName.allCases.flatMap { name in
            self[name].takeReports(now: now, includingOpenWindows: includingOpenWindows).map { (name, $0) }
        }
    }
}

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
}

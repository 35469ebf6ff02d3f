import Foundation
import Testing

@testable import CountersignServices

/// email-reset.md: a mail failing for now is retried until its code expires, then dropped.
@Suite struct OutboxRetryTests {
    @Test func aBackOffPastTheDeadlineBecomesALastTryJustBeforeIt() {
        let policy = OutboxService.RetryPolicy(base: 1, cap: 300)
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        // Attempt 9 backs off 128-256 s; with 60 s left the last try comes at 59 s.
        #expect(policy.nextAttempt(afterAttempt: 9, now: now, deadline: now.addingTimeInterval(60)) == now.addingTimeInterval(59))
        // Time enough: the back-off itself (attempt 1: 0.5-1 s).
        let soon = policy.nextAttempt(afterAttempt: 1, now: now, deadline: now.addingTimeInterval(600))
        #expect(soon.map { (0.5...1).contains($0.timeIntervalSince(now)) } == true)
        // Within the last second: dropped.
        #expect(policy.nextAttempt(afterAttempt: 1, now: now, deadline: now.addingTimeInterval(0.5)) == nil)
        #expect(policy.nextAttempt(afterAttempt: 1, now: now, deadline: now.addingTimeInterval(-5)) == nil)
    }
}

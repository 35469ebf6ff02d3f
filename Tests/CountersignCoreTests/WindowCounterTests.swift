import CountersignCore
import Foundation
import Testing

@Suite struct WindowCounterTests {
    static let t0 = Date(timeIntervalSince1970: 1_800_000_000)

    @Test func aLimitTripsAtItsCountAndNotBefore() {
        let limiter = WindowCounter(limit: RateLimit(count: 3, window: 900))
        #expect(limiter.hit("a", now: Self.t0) == nil)
        #expect(limiter.hit("a", now: Self.t0) == nil)
        #expect(limiter.hit("a", now: Self.t0) == nil)
        #expect(limiter.hit("a", now: Self.t0.addingTimeInterval(100)) == 800)
        // Other keys are untouched.
        #expect(limiter.hit("b", now: Self.t0) == nil)
    }

    @Test func theCountResetsWhenTheWindowEnds() {
        let limiter = WindowCounter(limit: RateLimit(count: 1, window: 60))
        #expect(limiter.hit("a", now: Self.t0) == nil)
        #expect(limiter.hit("a", now: Self.t0.addingTimeInterval(59.5)) == 1)
        #expect(limiter.hit("a", now: Self.t0.addingTimeInterval(60)) == nil)
        #expect(limiter.hit("a", now: Self.t0.addingTimeInterval(61)) == 59)
    }

    @Test func aBurstOfReservationsAdmitsOnlyTheLimitAndRefundsGiveBack() {
        let limiter = WindowCounter(limit: RateLimit(count: 5, window: 900))
        // 50 attempts before any of them finished its work: only 5 go ahead.
        let admissions = (0..<50).map { _ in limiter.reserve("a", now: Self.t0) }
        let admitted = admissions.compactMap { admission -> WindowCounter.Reservation? in
            if case .admitted(let reservation) = admission { return reservation }
            return nil
        }
        #expect(admitted.count == 5)
        #expect(admissions.filter { $0 == .refused(retryAfter: 900) }.count == 45)
        // A success gives its attempt back; failures stay counted.
        limiter.refund(admitted[0])
        #expect(limiter.hit("a", now: Self.t0) == nil)
        #expect(limiter.hit("a", now: Self.t0) == 900)
        // A refund from an ended window does not touch the new one.
        let old = admitted[1]
        #expect(limiter.hit("a", now: Self.t0.addingTimeInterval(900)) == nil)
        limiter.refund(old)
        for _ in 0..<4 { #expect(limiter.hit("a", now: Self.t0.addingTimeInterval(900)) == nil) }
        #expect(limiter.hit("a", now: Self.t0.addingTimeInterval(900)) != nil)
    }

    @Test func refusalsAreReportedOncePerKeyAndWindowWithTheirCount() {
        let limiter = WindowCounter(limit: RateLimit(count: 1, window: 10))
        let event = { (ip: String) in AuditEvent(at: Self.t0, kind: .rateLimited, context: AuditContext(ip: ip)) }
        #expect(limiter.hit("a", now: Self.t0, refusal: event("1")) == nil)
        for index in 0..<1000 { _ = limiter.hit("a", now: Self.t0.addingTimeInterval(1), refusal: event("\(index)")) }
        _ = limiter.hit("b", now: Self.t0, refusal: event("b"))
        // Nothing while the window is open.
        #expect(limiter.takeReports(now: Self.t0.addingTimeInterval(9)).isEmpty)
        let reports = limiter.takeReports(now: Self.t0.addingTimeInterval(10))
        #expect(reports == [WindowCounter.Report(firstRefusal: event("0"), refusals: 1000)])
        #expect(limiter.takeReports(now: Self.t0.addingTimeInterval(20)).isEmpty)
        // On shutdown, open windows report too, once.
        _ = limiter.hit("c", now: Self.t0.addingTimeInterval(30))
        _ = limiter.hit("c", now: Self.t0.addingTimeInterval(30), refusal: event("c"))
        #expect(limiter.takeReports(now: Self.t0.addingTimeInterval(31), includingOpenWindows: true).map(\.refusals) == [1])
        #expect(limiter.takeReports(now: Self.t0.addingTimeInterval(31), includingOpenWindows: true).isEmpty)
    }

    @Test func idleKeysAreForgottenAfterTheirWindow() {
        let limiter = WindowCounter(limit: RateLimit(count: 5, window: 10))
        for index in 0..<1000 { _ = limiter.hit("k\(index)", now: Self.t0) }
        #expect(limiter.trackedKeys == 1000)
        _ = limiter.hit("late", now: Self.t0.addingTimeInterval(11))
        #expect(limiter.trackedKeys == 1)
    }

    @Test func aFloodOfDistinctKeysStaysWithinCapacity() {
        let limiter = WindowCounter(limit: RateLimit(count: 5, window: 900), capacity: 10_000)
        for index in 0..<100_000 {
            _ = limiter.hit("198.51.\(index / 256 % 256).\(index % 256)#\(index)", now: Self.t0)
        }
        #expect(limiter.trackedKeys == 10_000)
        // The newest keys are still counted.
        for _ in 0..<4 { _ = limiter.hit("198.51.134.159#99999", now: Self.t0) }
        #expect(limiter.hit("198.51.134.159#99999", now: Self.t0) != nil)
    }

    @Test func everyNamedLimitHasTheContractDefault() {
        let limits = LimitCounters()
        #expect(limits[.resetInitiatePerEmail].limit == RateLimit(count: 3, window: 900))
        #expect(limits[.resetInitiatePerIP].limit == RateLimit(count: 10, window: 900))
        #expect(limits[.loginFailuresPerEmail].limit == RateLimit(count: 5, window: 900))
        #expect(limits[.loginFailuresPerIP].limit == RateLimit(count: 5, window: 900))
        #expect(limits[.refreshKeyFailuresPerDevice].limit == RateLimit(count: 5, window: 900))
        #expect(limits[.statusPollsPerIP].limit == RateLimit(count: 50, window: 1))
        #expect(limits[.respondPerDevice].limit == RateLimit(count: 10, window: 60))
        // email-reset.md and approvals-api.md.
        #expect(limits[.emailResetPerEmail].limit == RateLimit(count: 3, window: 3600))
        #expect(limits[.emailResetPerIP].limit == RateLimit(count: 10, window: 3600))
        #expect(limits[.emailVerifyFailuresPerIP].limit == RateLimit(count: 20, window: 3600))
        #expect(limits[.approvalsPerUser].limit == RateLimit(count: 10, window: 60))
        #expect(limits[.approvalsPerIntegration].limit == RateLimit(count: 100, window: 1))
        #expect(limits[.enrollFailuresPerIP].limit == RateLimit(count: 10, window: 900))
        // trust.md and offline-codes.md.
        #expect(limits[.enrollmentsPerIntegration].limit == RateLimit(count: 30, window: 600))
        #expect(limits[.approvalsPerUserAllIntegrations].limit == RateLimit(count: 30, window: 60))
        #expect(limits[.deviceKeyChangesPerDevice].limit == RateLimit(count: 5, window: 3600))
        #expect(limits[.verifyCodePerIP].limit == RateLimit(count: 10, window: 900))
        let custom = LimitCounters([.statusPollsPerIP: RateLimit(count: 2, window: 5)])
        #expect(custom[.statusPollsPerIP].limit == RateLimit(count: 2, window: 5))
    }
}

@Suite struct LongPollSlotsTests {
    @Test func slotsAreCappedPerAddressAndInAll() {
        let slots = LongPollSlots(perAddress: 2, total: 3)
        #expect(slots.acquire("a"))
        #expect(slots.acquire("a"))
        #expect(!slots.acquire("a"))
        #expect(slots.acquire("b"))
        // The node is full: another address is refused too.
        #expect(!slots.acquire("c"))
        slots.release("a")
        #expect(slots.acquire("c"))
        #expect(slots.held == 3)
        // Releasing what was never held changes nothing.
        slots.release("nobody")
        #expect(slots.held == 3)
    }
}

@Suite struct PushQueueTests {
    static func prompt(_ id: String) -> PushJob {
        .prompt(
            requestID: id, userID: "u", action: .passwordReset, expiresAt: Date(timeIntervalSince1970: 1_800_000_060),
            requester: RequesterInfo(ip: "203.0.113.7", userAgent: nil))
    }
    static func resolved(_ id: String) -> PushJob { .resolved(requestID: id, userID: "u", status: .approved) }

    @Test func promptsGoBeforeResolutionNotices() async {
        let queue = PushQueue()
        queue.enqueue(Self.resolved("r1"))
        queue.enqueue(Self.resolved("r2"))
        queue.enqueue(Self.prompt("p1"))
        queue.enqueue(Self.resolved("r3"))
        queue.enqueue(Self.prompt("p2"))
        var order: [PushJob] = []
        for _ in 0..<5 { if let job = await queue.next() { order.append(job) } }
        #expect(order == [Self.prompt("p1"), Self.prompt("p2"), Self.resolved("r1"), Self.resolved("r2"), Self.resolved("r3")])
    }

    @Test func aFullQueueDropsTheOldestOfItsKindAndSaysWhich() async {
        let queue = PushQueue(capacity: 2)
        #expect(queue.enqueue(Self.prompt("p1")) == nil)
        #expect(queue.enqueue(Self.prompt("p2")) == nil)
        #expect(queue.enqueue(Self.resolved("r1")) == nil)
        #expect(queue.enqueue(Self.prompt("p3")) == Self.prompt("p1"))
        #expect(queue.dropped == 1)
        #expect(queue.count == 3)
        #expect(await queue.next() == Self.prompt("p2"))
    }

    @Test func aWaitingConsumerGetsTheNextJobAndCancellationEndsIt() async {
        let queue = PushQueue()
        let consumer = Task { await queue.next() }
        try? await Task.sleep(for: .milliseconds(50))
        queue.enqueue(Self.prompt("p1"))
        #expect(await consumer.value == Self.prompt("p1"))
        let cancelled = Task { await queue.next() }
        cancelled.cancel()
        #expect(await cancelled.value == nil)
    }
}

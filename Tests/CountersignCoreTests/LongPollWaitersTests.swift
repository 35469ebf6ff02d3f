import Testing

@testable import CountersignCore

/// The broker's registry of parked long polls, as a plain value: each waiter
/// is handed out once, whichever wake-up comes first.
@Suite struct LongPollWaitersTests {
    @Test func eachWaiterIsTakenOnceWhicheverWakeUpComesFirst() {
        var polls = LongPollWaiters<String>()
        let numbers = (0..<3).map { _ in polls.newNumber() }
        #expect(Set(numbers).count == 3)
        polls.park("a0", id: "a", number: numbers[0])
        polls.park("a1", id: "a", number: numbers[1])
        polls.park("b0", id: "b", number: numbers[2])
        #expect(polls.count == 3 && polls.waiting(on: "a") == 2)

        // Its timeout took one of a's waiters: the transition wakes only the other.
        #expect(polls.take("a", number: numbers[0]) == "a0")
        #expect(polls.take("a", number: numbers[0]) == nil)
        #expect(polls.takeAll("a") == ["a1"])
        #expect(polls.takeAll("a").isEmpty)
        #expect(polls.waiting(on: "a") == 0 && polls.ids == ["b"])
        // The last waiter of a request taken by number leaves no empty entry behind.
        #expect(polls.take("b", number: numbers[2]) == "b0")
        #expect(polls.ids.isEmpty && polls.count == 0)
    }

    @Test func timeoutsComeDueSoonestFirst() {
        var polls = LongPollWaiters<Int>()
        let start = ContinuousClock.now
        for (number, seconds) in [(0, 30), (1, 5), (2, 10)] {
            polls.schedule(WaiterTimeout(at: start.advanced(by: .seconds(seconds)), id: "r\(number)", number: number))
        }
        #expect(polls.soonest == start.advanced(by: .seconds(5)))
        #expect(polls.takeDue(at: start.advanced(by: .seconds(4))).isEmpty)
        #expect(polls.takeDue(at: start.advanced(by: .seconds(10))).map(\.number) == [1, 2])
        #expect(polls.soonest == start.advanced(by: .seconds(30)))
        #expect(polls.takeDue(at: start.advanced(by: .seconds(60))).map(\.id) == ["r0"])
        #expect(polls.soonest == nil)
    }
}

import Synchronization
import Testing

@testable import CountersignHTTP

/// Long polls park and are answered in turn (``InTurn``): a burst of them
/// starts no task each, and nothing handed on is lost or done twice.
@Suite struct InTurnTests {
    /// A record of the work done, and of how much ran at once.
    final class Log: Sendable {
        private let state = Mutex<(done: [Int], running: Int, most: Int)>(([], 0, 0))
        func began() {
            state.withLock {
                $0.running += 1
                $0.most = max($0.most, $0.running)
            }
        }
        /// How many have ended, this one included.
        @discardableResult func ended(_ number: Int) -> Int {
            state.withLock {
                $0.running -= 1
                $0.done.append(number)
                return $0.done.count
            }
        }
        var done: [Int] { state.withLock { $0.done } }
        var most: Int { state.withLock { $0.most } }
    }

    /// One at a time, work is done in the order it was handed on, each once.
    @Test(.timeLimit(.minutes(5))) func oneAtATimeKeepsTheOrder() async throws {
        let turns = InTurn(width: 1)
        let log = Log()
        let finished = AsyncStream.makeStream(of: Void.self)
        for number in 0..<100 {
            turns.run {
                log.began()
                await Task.yield()  // a suspension in the middle, as a route's
                log.ended(number)
                if number == 99 { finished.continuation.yield() }
            }
        }
        for await _ in finished.stream { break }
        #expect(log.done == Array(0..<100))
        #expect(log.most == 1)
    }

    /// No more than `width` pieces run at once, however many are handed on at
    /// once from many tasks; each is done exactly once, and a later one starts
    /// as soon as one ends.
    @Test(.timeLimit(.minutes(5))) func noMoreThanItsWidthRunAtOnce() async throws {
        let turns = InTurn(width: 4)
        let log = Log()
        let gate = Gate()
        let finished = AsyncStream.makeStream(of: Void.self)
        await withTaskGroup(of: Void.self) { group in
            for number in 0..<200 {
                group.addTask {
                    turns.run {
                        log.began()
                        await gate.pass()
                        if log.ended(number) == 200 { finished.continuation.yield() }
                    }
                }
            }
        }
        // Four are held at the gate; the other 196 wait their turn without running.
        while gate.waiting < 4 { await Task.yield() }
        #expect(log.done.isEmpty)
        gate.open()
        for await _ in finished.stream { break }
        #expect(log.done.sorted() == Array(0..<200))
        #expect(log.most == 4)
    }

    @TaskLocal static var marker: String?

    /// Work runs in the turns' own tasks: it sees nothing of the task that
    /// happened to hand it on (a woken poll's answer must not run as the
    /// waker's route asking to park).
    @Test(.timeLimit(.minutes(5))) func workTakesNothingFromTheTaskThatHandedItOn() async throws {
        let turns = InTurn(width: 1)
        let (seen, seeing) = AsyncStream.makeStream(of: String?.self)
        Self.$marker.withValue("the waker's") {
            turns.run { seeing.yield(Self.marker) }
        }
        var iterator = seen.makeAsyncIterator()
        let marker = try #require(await iterator.next())
        #expect(marker == nil)
    }

    /// Work keeps the priority of the task that handed it on, as a task of its
    /// own would have: at a lower one it would wait behind everything else.
    @Test(.timeLimit(.minutes(5))) func workKeepsThePriorityOfTheTaskThatHandedItOn() async throws {
        let turns = InTurn(width: 1)
        let (seen, seeing) = AsyncStream.makeStream(of: TaskPriority.self)
        await Task(priority: .high) { turns.run { seeing.yield(Task.currentPriority) } }.value
        var iterator = seen.makeAsyncIterator()
        let priority = try #require(await iterator.next())
        #expect(priority >= .high)
    }

    /// Holds its callers until it is opened; then lets every caller through.
    final class Gate: Sendable {
        private let state = Mutex<(held: [CheckedContinuation<Void, Never>], open: Bool)>(([], false))
        var waiting: Int { state.withLock { $0.held.count } }

        func pass() async {
            await withCheckedContinuation { continuation in
                let through = state.withLock { state in
                    if !state.open { state.held.append(continuation) }
                    return state.open
                }
                if through { continuation.resume() }
            }
        }

        func open() {
            let held = state.withLock { state in
                state.open = true
                defer { state.held = [] }
                return state.held
            }
            for continuation in held { continuation.resume() }
        }
    }
}

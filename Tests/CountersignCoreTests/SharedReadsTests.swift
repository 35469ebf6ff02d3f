import Testing

@testable import CountersignCore

/// Reads of one request asked for together share a query, and no caller is
/// handed a value read before it asked.
@Suite struct SharedReadsTests {
    /// A read function whose reads end only when the test says so. Each read
    /// answers with its own number (1 for the first read started, and so on).
    actor ScriptedReads {
        private(set) var started: [String] = []
        private var held: [Int: CheckedContinuation<Void, Never>] = [:]
        private var failing: Set<Int> = []

        func read(_ key: String) async throws -> Int {
            started.append(key)
            let number = started.count
            await withCheckedContinuation { held[number] = $0 }
            // As a database query does: a read in a cancelled task fails.
            try Task.checkCancellation()
            if failing.contains(number) { throw ReadFailed() }
            return number
        }

        /// Ends read `number` (once it is held), failing it if `fail`.
        func end(_ number: Int, fail: Bool = false) async throws {
            while held[number] == nil { try await Task.sleep(for: .milliseconds(2)) }
            if fail { failing.insert(number) }
            held.removeValue(forKey: number)?.resume()
        }

        func waitForStarts(_ count: Int) async throws {
            while started.count < count { try await Task.sleep(for: .milliseconds(2)) }
        }
    }

    struct ReadFailed: Error {}

    @Test(.timeLimit(.minutes(5))) func callersWhoAskWhileAReadRunsShareTheNextOne() async throws {
        let script = ScriptedReads()
        let reads = SharedReads<Int>(patience: .seconds(3600)) { try await script.read($0) }
        let first = Task { try await reads.value(of: "r") }
        try await script.waitForStarts(1)
        let joiners = (0..<5).map { _ in Task { try await reads.value(of: "r") } }
        while reads.waiting(for: "r") < 5 { try await Task.sleep(for: .milliseconds(2)) }
        // Another request is read on its own, at once.
        let other = Task { try await reads.value(of: "s") }
        try await script.waitForStarts(2)

        // The five asked while read 1 ran: none of them gets its value (it may
        // have been read before they asked), they all get the next read's.
        try await script.end(1)
        #expect(try await first.value == 1)
        try await script.waitForStarts(3)
        try await script.end(3)
        for joiner in joiners { #expect(try await joiner.value == 3) }
        try await script.end(2)
        #expect(try await other.value == 2)
        #expect(await script.started == ["r", "s", "r"])
        #expect(reads.waiting(for: "r") == 0)

        // Nothing under way any more: the next caller reads on its own.
        let later = Task { try await reads.value(of: "r") }
        try await script.end(4)
        #expect(try await later.value == 4)
    }

    @Test(.timeLimit(.minutes(5))) func aFailedReadFailsOnlyThoseWhoWaitedForIt() async throws {
        let script = ScriptedReads()
        let reads = SharedReads<Int>(patience: .seconds(3600)) { try await script.read($0) }
        let first = Task { try await reads.value(of: "r") }
        try await script.waitForStarts(1)
        let joiners = (0..<3).map { _ in Task { try await reads.value(of: "r") } }
        while reads.waiting(for: "r") < 3 { try await Task.sleep(for: .milliseconds(2)) }
        try await script.end(1)
        #expect(try await first.value == 1)

        // Read 2 (the joiners') fails; a caller who asks while it runs waits for read 3, which succeeds.
        try await script.waitForStarts(2)
        let late = Task { try await reads.value(of: "r") }
        while reads.waiting(for: "r") < 1 { try await Task.sleep(for: .milliseconds(2)) }
        try await script.end(2, fail: true)
        for joiner in joiners { await #expect(throws: ReadFailed.self) { try await joiner.value } }
        try await script.end(3)
        #expect(try await late.value == 3)
    }

    @Test(.timeLimit(.minutes(5))) func aCancelledCallerDoesNotFailTheOthers() async throws {
        let script = ScriptedReads()
        let reads = SharedReads<Int>(patience: .seconds(3600)) { try await script.read($0) }
        let first = Task { try await reads.value(of: "r") }
        try await script.waitForStarts(1)
        let joiners = (0..<2).map { _ in Task { try await reads.value(of: "r") } }
        while reads.waiting(for: "r") < 2 { try await Task.sleep(for: .milliseconds(2)) }
        try await script.end(1)
        _ = try await first.value
        try await script.waitForStarts(2)
        joiners[0].cancel()
        try await script.end(2)
        #expect(try await joiners[0].value == 2)
        #expect(try await joiners[1].value == 2)
    }

    /// A read under way for longer than the patience may be stuck: a caller
    /// then reads on its own instead of waiting for it (here the patience is zero).
    @Test(.timeLimit(.minutes(5))) func aReadUnderWayTooLongIsNotWaitedFor() async throws {
        let script = ScriptedReads()
        let reads = SharedReads<Int>(patience: .zero) { try await script.read($0) }
        let stuck = Task { try await reads.value(of: "r") }
        try await script.waitForStarts(1)
        let second = Task { try await reads.value(of: "r") }
        // Read 2 starts while read 1 is still under way, and answers the second caller.
        try await script.waitForStarts(2)
        #expect(reads.waiting(for: "r") == 0)
        try await script.end(2)
        #expect(try await second.value == 2)
        try await script.end(1)
        #expect(try await stuck.value == 1)
    }
}

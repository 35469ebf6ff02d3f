import Synchronization

/// Tells a waiting long poll that its client is gone: the connection's
/// client closed its side, or the connection ended. A poll whose answer
/// nobody will read stops waiting then, and gives its slot back.
public protocol HangUpSignal: AnyObject, Sendable {
    /// Whether the client has hung up.
    var hasHungUp: Bool { get }
    /// Runs `action` once when the client hangs up, at once if it has.
    /// Returns the number to ``forget(_:)`` it by.
    func whenHungUp(_ action: @escaping @Sendable () -> Void) -> Int
    /// Drops the action registered as `number` if it has not run: a poll that
    /// stopped waiting leaves nothing behind on a kept-alive connection.
    func forget(_ number: Int)
}

/// The actions waiting on one client's hang-up: registered, forgotten, and
/// run once when ``hangUp()`` is called (by its connection).
public final class HangUpActions: HangUpSignal {
    private struct State {
        var hungUp = false
        var next = 0
        /// In a list, not a dictionary: a connection has one or two at a time, and every open
        /// connection with a waiting poll keeps this storage.
        var actions: [(number: Int, action: @Sendable () -> Void)] = []
    }
    private let state = Mutex(State())

    public init() {}

    /// The client is gone: runs every action registered, once.
    public func hangUp() {
        let actions = state.withLock { state in
            state.hungUp = true
            defer { state.actions = [] }
            return state.actions.map(\.action)
        }
        for action in actions { action() }
    }

    public var hasHungUp: Bool { state.withLock { $0.hungUp } }

    /// Actions registered and not yet run or forgotten.
    public var registered: Int { state.withLock { $0.actions.count } }

    public func whenHungUp(_ action: @escaping @Sendable () -> Void) -> Int {
        let (number, now) = state.withLock { state in
            defer { state.next += 1 }
            if !state.hungUp { state.actions.append((state.next, action)) }
            return (state.next, state.hungUp)
        }
        if now { action() }
        return number
    }

    public func forget(_ number: Int) {
        state.withLock { $0.actions.removeAll { $0.number == number } }
    }
}

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

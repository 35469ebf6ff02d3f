import Foundation

/// A try at a typed code, counted against the user's bound across routes.
public enum UserCodeTry: Sendable, Equatable {
    /// Counted: the number of this try in the user's window, and when that window began.
    case taken(Int, windowStart: Date)
    /// The user has typed as many wrong codes as the window allows: every code is refused until `until`.
    case locked(until: Date)
    /// No such user row (a request for an unknown email): nothing to count against.
    case noUser
}

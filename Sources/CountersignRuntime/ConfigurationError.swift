/// A bad setting: one line naming the setting, where it came from and what is expected.
public struct ConfigurationError: Error, CustomStringConvertible, Equatable {
    public var description: String
    public init(_ description: String) { self.description = description }
}

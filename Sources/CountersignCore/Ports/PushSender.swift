import Logging

/// Delivers one push message to one device.
public protocol PushSender: Sendable {
    func send(_ job: PushJob, to device: Device, logger: Logger) async -> PushOutcome
    /// How push is doing, for `/healthz`.
    var health: PushHealth { get }
}

extension PushSender {
    public var health: PushHealth { .ok }
}

/// The `push` field of `/healthz`.
public enum PushHealth: String, Sendable {
    /// Push is configured and the last sends went through.
    case ok
    /// Push is not configured.
    case disabled
    /// A push gave up recently and none succeeded since.
    case degraded
    /// The push service refused our credentials, or does not know the project or
    /// endpoint we send to (a 404 naming no token), and nothing succeeded since: both
    /// are the operator's configuration to check, and http-api.md lists only these values.
    case authError = "auth_error"
}

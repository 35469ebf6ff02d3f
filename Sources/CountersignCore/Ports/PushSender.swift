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
    /// The push service refused our credentials, and nothing succeeded since.
    case authError = "auth_error"
    /// The push service says the send address is wrong (project id, endpoint), and nothing succeeded since.
    case misconfigured
}

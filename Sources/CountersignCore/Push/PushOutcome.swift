/// How one push to one device ended, for the audit trail, logs and metrics.
public enum PushOutcome: String, Sendable, CaseIterable {
    /// The push service accepted the message.
    case sent
    /// Push is not configured: nothing was sent.
    case disabled
    /// The token is dead (unregistered, wrong sender, malformed): the device gets no more pushes until it sends a new one.
    case tokenDead = "token_dead"
    /// The push service refused the message for good (no retry).
    case rejected
    /// Retries ran out, or could not finish before the request expired: dropped.
    case dropped
    /// The push service refused our credentials.
    case authError = "auth_error"
    /// The push service says the send address is wrong (project id, endpoint): nothing was disabled.
    case misconfigured
}

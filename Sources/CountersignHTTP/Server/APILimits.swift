/// Bounds on what a client may send or hold.
public enum APILimits {
    public static let maxBodyBytes = 16 * 1024
    public static let maxLongPollSeconds = 30
    /// `"wait"` of a create: at most 55 s, under a RADIUS client's usual 60 s.
    public static let maxCreateWaitSeconds = 55
    public static let maxUserAgentBytes = 256
}

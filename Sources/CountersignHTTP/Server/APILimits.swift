/// Bounds on what a client may send or hold.
public enum APILimits {
    public static let maxBodyBytes = 16 * 1024
    public static let maxLongPollSeconds = 30
    public static let maxUserAgentBytes = 256
}

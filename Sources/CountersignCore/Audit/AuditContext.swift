/// Who did it and from where, as far as the daemon knows.
public struct AuditContext: Sendable, Equatable {
    public var ip: String?
    public var userAgent: String?
    public var deviceID: String?

    public init(ip: String? = nil, userAgent: String? = nil, deviceID: String? = nil) {
        self.ip = ip
        self.userAgent = userAgent
        self.deviceID = deviceID
    }

    public static let system = AuditContext()
}

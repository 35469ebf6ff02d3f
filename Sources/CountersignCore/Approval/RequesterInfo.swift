import Foundation

/// Who asked for an approval, as seen by the daemon: shown to the approving device.
public struct RequesterInfo: Sendable, Equatable {
    public var ip: String
    public var userAgent: String?

    public init(ip: String, userAgent: String?) {
        self.ip = ip
        self.userAgent = userAgent
    }
}

import CountersignCore
import HTTPTypes
import Hummingbird

extension Request {
    /// Who is asking, for the audit trail: the client address and the user agent.
    func auditContext(_ context: AppRequestContext, deviceID: String? = nil) -> AuditContext {
        AuditContext(ip: context.clientIP, userAgent: userAgent, deviceID: deviceID)
    }

    /// The `User-Agent` header as it may be shown and stored: control
    /// characters removed, at most ``APILimits/maxUserAgentBytes`` bytes.
    var userAgent: String? {
        guard let agent = headers[.userAgent] else { return nil }
        let printable = String(agent.unicodeScalars.filter { $0.properties.generalCategory != .control }.map(Character.init))
        return String(printable.utf8.prefix(APILimits.maxUserAgentBytes)) ?? String(printable.prefix(APILimits.maxUserAgentBytes / 4))
    }
}

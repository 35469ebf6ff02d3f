import Foundation
import HTTPTypes
import Hummingbird
import NIOCore

/// The request context of every route: Hummingbird's core storage plus the client address.
public struct AppRequestContext: RequestContext {
    public var coreContext: CoreRequestContextStorage

    /// The client address used for rate limits and the audit trail: the
    /// socket peer, or the forwarded address behind a trusted proxy (set by ``RequestIntakeMiddleware``).
    public var clientIP: String

    /// What per-client limits count under: the client address, or its /64 for IPv6.
    public var clientKey: String { ClientAddress.limitKey(clientIP) }

    public init(source: ApplicationRequestContextSource) {
        self.coreContext = .init(source: source)
        self.clientIP = source.channel.remoteAddress?.ipAddress ?? "unknown"
    }

    /// Bodies larger than 16 KiB are refused with 413.
    public var maxUploadSize: Int { APILimits.maxBodyBytes }

    /// JSON with sorted keys, so that equal answers are equal bytes.
    public var responseEncoder: JSONEncoder { APIJSON.encoder }
}

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

    /// The client's connection: a long poll stops waiting when it hangs up.
    let channel: any Channel

    public init(source: ApplicationRequestContextSource) {
        self.coreContext = .init(source: source)
        self.clientIP = source.channel.remoteAddress?.ipAddress ?? "unknown"
        self.channel = source.channel
    }

    /// Runs `wait` (a long poll) until it returns or the client closes its
    /// connection, whichever comes first: then `wait` is cancelled (the broker
    /// drops its waiter) and its slot is given back by the caller at once.
    /// `nil` when the client left.
    public func whileConnected<T: Sendable>(_ wait: @escaping @Sendable () async throws -> T) async throws -> T? {
        // The watcher is in the pipeline of every connection the server accepts.
        guard let watcher = try? await channel.pipeline.handler(type: HangUpWatcher.self).get() else { return try await wait() }
        return try await withThrowingTaskGroup(of: T?.self) { group in
            group.addTask { try await wait() }
            group.addTask {
                await watcher.untilHungUp()
                return nil
            }
            defer { group.cancelAll() }
            return try await group.next() ?? nil
        }
    }

    /// Bodies larger than 16 KiB are refused with 413.
    public var maxUploadSize: Int { APILimits.maxBodyBytes }

    /// JSON with sorted keys, so that equal answers are equal bytes.
    public var responseEncoder: JSONEncoder { APIJSON.encoder }
}

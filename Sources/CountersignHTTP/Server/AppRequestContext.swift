import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import Synchronization

/// The request context of every route: Hummingbird's core storage plus the client address.
public struct AppRequestContext: RequestContext {
    public var coreContext: CoreRequestContextStorage

    /// The client address used for rate limits and the audit trail: the
    /// socket peer, or the forwarded address behind a trusted proxy (set by ``EntryMiddleware``).
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
        let closed =
            (try? await channel.pipeline.handler(type: HangUpWatcher.self).get())?.hungUp.futureResult ?? channel.closeFuture
        return try await withThrowingTaskGroup(of: T?.self) { group in
            group.addTask { try await wait() }
            group.addTask {
                await Self.untilCompleted(closed)
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

    /// Waits for `future`, or until the task is cancelled (an `EventLoopFuture`'s
    /// own `get()` cannot be cancelled: a group would wait on it for good).
    static func untilCompleted(_ future: EventLoopFuture<Void>) async {
        enum State {
            case idle
            case waiting(CheckedContinuation<Void, Never>)
            case done
        }
        let state = Mutex(State.idle)
        @Sendable func finish() {
            let waiting = state.withLock { state -> CheckedContinuation<Void, Never>? in
                defer { state = .done }
                if case .waiting(let continuation) = state { return continuation }
                return nil
            }
            waiting?.resume()
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let finished = state.withLock { state -> Bool in
                    if case .done = state { return true }
                    state = .waiting(continuation)
                    return false
                }
                if finished {
                    continuation.resume()
                } else {
                    future.whenComplete { _ in finish() }
                }
            }
        } onCancel: {
            finish()
        }
    }
}

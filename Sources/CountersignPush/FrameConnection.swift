import NIOCore
import NIOHPACK
import Synchronization

/// One connection and the handler that owns its streams (on the channel's event loop).
final class FrameConnection: Sendable {
    let channel: any Channel
    private let handler: NIOLoopBound<FrameHandler>
    private let tokens = Atomic<UInt64>(0)

    init(channel: any Channel, handler: FrameHandler) {
        self.channel = channel
        self.handler = NIOLoopBound(handler, eventLoop: channel.eventLoop)
        self.retired = handler.retired
    }

    /// False once the connection takes no new request.
    let retired: RaisedFlag
    var isUsable: Bool { !retired.isRaised }

    func send(_ head: HPACKHeaders, body: ByteBuffer, deadline: NIODeadline) async throws -> HTTP2PushClient.Response {
        try Task.checkCancellation()
        let promise = channel.eventLoop.makePromise(of: HTTP2PushClient.Response.self)
        let token = tokens.wrappingAdd(1, ordering: .relaxed).newValue
        let handler = handler
        // Raised before the cancel job is queued: a send that runs after it never starts, one that ran before is reset.
        let cancelled = RaisedFlag()
        return try await withTaskCancellationHandler {
            channel.eventLoop.execute {
                guard !cancelled.isRaised else { return promise.fail(CancellationError()) }
                handler.value.send(head, body: body, deadline: deadline, token: token, promise: promise)
            }
            return try await promise.futureResult.get()
        } onCancel: {
            cancelled.raise()
            channel.eventLoop.execute { handler.value.cancel(token) }
        }
    }
}

/// A flag raised once and read from any thread: a connection that takes no new request (retired), a request
/// that was cancelled.
final class RaisedFlag: Sendable {
    private let flag = Atomic<Bool>(false)
    var isRaised: Bool { flag.load(ordering: .relaxed) }
    func raise() { flag.store(true, ordering: .relaxed) }
}

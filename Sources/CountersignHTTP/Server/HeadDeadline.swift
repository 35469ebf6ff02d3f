import HTTPTypes
import NIOCore
import NIOHTTPTypes

/// The head deadline of one connection, shared by its two watchers. Only
/// ever touched on the connection's event loop (both handlers run there).
final class HeadDeadline: @unchecked Sendable {
    /// Between requests: the next byte starts a request whose head must arrive in time.
    var awaitingHead = true
    var timer: Scheduled<Void>?

    func cancel() {
        timer?.cancel()
        timer = nil
    }
}

/// Starts the head deadline at the first byte of a request.
final class ByteWatcher: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    let deadline: HeadDeadline
    let timeout: TimeAmount

    init(deadline: HeadDeadline, timeout: TimeAmount) {
        self.deadline = deadline
        self.timeout = timeout
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if deadline.awaitingHead && deadline.timer == nil {
            let channel = context.channel
            deadline.timer = context.eventLoop.scheduleTask(in: timeout) { channel.close(promise: nil) }
        }
        context.fireChannelRead(data)
    }

    func channelInactive(context: ChannelHandlerContext) {
        deadline.cancel()
        context.fireChannelInactive()
    }
}

/// Stops the head deadline once the decoder has the whole head, and re-arms
/// it for the next request once the response has been written.
final class HeadWatcher: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart
    let deadline: HeadDeadline

    init(deadline: HeadDeadline) {
        self.deadline = deadline
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case .head = unwrapInboundIn(data) {
            deadline.awaitingHead = false
            deadline.cancel()
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .end = unwrapOutboundIn(data) {
            deadline.awaitingHead = true
        }
        context.write(data, promise: promise)
    }
}

import HTTPTypes
import NIOCore
import NIOHTTPTypes

/// The request deadline of one connection (named for the head it first
/// covered; it now runs to the request's end), shared by its two watchers. Only
/// ever touched on the connection's event loop (both handlers run there).
///
/// One timer at a time, armed when a request's first byte arrives and no
/// timer is pending; a head that arrives in time leaves it running rather
/// than cancelling it. When it fires it closes the connection only if a head
/// has been awaited for `timeout` or longer; a later head still arriving gets
/// the timer again for the rest of its own time. A kept-alive connection so
/// costs a timer every `timeout`, not a scheduling and a cancellation per
/// request (those were 7% of the daemon's time under a status-poll load).
final class HeadDeadline: @unchecked Sendable {
    /// Between requests: the next byte starts a request whose head must arrive in time.
    var awaitingHead = true
    /// When the head now awaited began to arrive; `nil` while none is arriving.
    private(set) var headStarted: NIODeadline?
    private var timer: Scheduled<Void>?

    /// A request's first byte arrived.
    func headBegins(on channel: any Channel, timeout: TimeAmount) {
        let now = NIODeadline.now()
        headStarted = now
        if timer == nil { arm(at: now + timeout, on: channel, timeout: timeout) }
    }

    /// The whole head arrived.
    func headArrived() {
        awaitingHead = false
        headStarted = nil
    }

    private func arm(at deadline: NIODeadline, on channel: any Channel, timeout: TimeAmount) {
        timer = channel.eventLoop.scheduleTask(deadline: deadline) { [self] in
            timer = nil
            guard let started = headStarted else { return }
            if NIODeadline.now() >= started + timeout {
                channel.close(promise: nil)
            } else {
                arm(at: started + timeout, on: channel, timeout: timeout)
            }
        }
    }

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
        if deadline.awaitingHead && deadline.headStarted == nil {
            deadline.headBegins(on: context.channel, timeout: timeout)
        }
        context.fireChannelRead(data)
    }

    func channelInactive(context: ChannelHandlerContext) {
        deadline.cancel()
        context.fireChannelInactive()
    }
}

/// Stops the deadline once the decoder has the whole request (head and body), and re-arms
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
        // The deadline covers the whole request: a body dribbled a byte at a time is cut too.
        if case .end = unwrapInboundIn(data) {
            deadline.headArrived()
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

/// Completes `hungUp` when the client stops sending (it closed its side, or
/// the connection ended): a long poll waiting for an answer nobody will read
/// lets go of its slot then. Hummingbird keeps half-closed connections open,
/// so the channel's own close would come only when the answer is written.
final class HangUpWatcher: ChannelInboundHandler, RemovableChannelHandler, @unchecked Sendable {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    /// Only ever completed, from the channel's event loop.
    let hungUp: EventLoopPromise<Void>

    init(eventLoop: any EventLoop) {
        hungUp = eventLoop.makePromise()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? ChannelEvent, event == .inputClosed { hungUp.succeed() }
        context.fireUserInboundEventTriggered(event)
    }

    func channelInactive(context: ChannelHandlerContext) {
        hungUp.succeed()
        context.fireChannelInactive()
    }
}

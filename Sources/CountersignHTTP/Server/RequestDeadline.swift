import CountersignCore
import HTTPTypes
import NIOCore
import NIOHTTP1
import NIOHTTPTypes
import Synchronization

/// The request deadline of one connection (head and body), shared by its two watchers. Only
/// ever touched on the connection's event loop (both handlers run there).
///
/// One timer at a time, armed when a request's first byte arrives and no
/// timer is pending; a request that arrives in time leaves it running rather
/// than cancelling it. When it fires it closes the connection only if a request
/// has been awaited for `timeout` or longer; a later request still arriving gets
/// the timer again for the rest of its own time. A kept-alive connection so
/// costs a timer every `timeout`, not a scheduling and a cancellation per
/// request (those were 7% of the daemon's time under a status-poll load).
final class RequestDeadline: @unchecked Sendable {
    /// When the request now awaited began to arrive; `nil` while none is
    /// arriving (between requests, or while one is answered): the next byte
    /// then starts a request that must arrive whole in time.
    private(set) var requestStarted: NIODeadline?
    private var timer: Scheduled<Void>?

    /// A request's first byte arrived.
    func requestBegins(on channel: any Channel, timeout: TimeAmount) {
        let now = NIODeadline.now()
        requestStarted = now
        if timer == nil { arm(at: now + timeout, on: channel, timeout: timeout) }
    }

    /// The whole request arrived (its `.end`), whether or not it was answered
    /// already: the next byte is the next request's.
    func requestArrived() {
        requestStarted = nil
    }

    private func arm(at deadline: NIODeadline, on channel: any Channel, timeout: TimeAmount) {
        timer = channel.eventLoop.scheduleTask(deadline: deadline) { [self] in
            timer = nil
            guard let started = requestStarted else { return }
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
    let deadline: RequestDeadline
    let timeout: TimeAmount

    init(deadline: RequestDeadline, timeout: TimeAmount) {
        self.deadline = deadline
        self.timeout = timeout
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if deadline.requestStarted == nil {
            deadline.requestBegins(on: context.channel, timeout: timeout)
        }
        context.fireChannelRead(data)
    }

    func channelInactive(context: ChannelHandlerContext) {
        deadline.cancel()
        context.fireChannelInactive()
    }
}

/// Stops the deadline once the decoder has the whole request (head and
/// body). An answer written before the body ends (an early refusal) changes
/// nothing: the body must still arrive in time, and the next request too.
///
/// It sits right after the HTTP decoder, before the pipelining handler that
/// holds a request pipelined behind one still being answered: that request's
/// deadline stops when it has arrived, not when its turn comes.
final class RequestWatcher: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    let deadline: RequestDeadline
    let timeout: TimeAmount

    init(deadline: RequestDeadline, timeout: TimeAmount) {
        self.deadline = deadline
        self.timeout = timeout
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head where deadline.requestStarted == nil:
            // Its first bytes came in the read that ended the request before it, while
            // that one's deadline still ran: the byte watcher started none for it.
            deadline.requestBegins(on: context.channel, timeout: timeout)
        case .end:
            // The deadline covers the whole request: a body dribbled a byte at a time is cut too.
            deadline.requestArrived()
        default:
            break
        }
        context.fireChannelRead(data)
    }
}

/// Tells waiting long polls when the client stops sending (it closed its
/// side, or the connection ended): a poll whose answer nobody will read lets
/// go of its slot then. Hummingbird keeps half-closed connections open, so the
/// channel's own close would come only when the answer is written. A poll's
/// action leaves the list when it stops waiting, so a kept-alive connection
/// carrying many polls holds nothing per past poll.
final class HangUpWatcher: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    /// What the connection's long polls wait on.
    let actions = HangUpActions()

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? ChannelEvent, event == .inputClosed { actions.hangUp() }
        context.fireUserInboundEventTriggered(event)
    }

    func channelInactive(context: ChannelHandlerContext) {
        actions.hangUp()
        context.fireChannelInactive()
    }
}

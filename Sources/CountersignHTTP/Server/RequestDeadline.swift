import CountersignCore
import HTTPTypes
import NIOCore
import NIOHTTP1
import NIOHTTPTypes
import Synchronization

/// A connection's guards on its raw bytes, in one handler (each handler costs
/// every open connection its own context): the request deadline (head and
/// body) and the hang-up its long polls wait on. Only ever touched on the
/// connection's event loop (the handler, its timer and ``RequestWatcher`` run there).
///
/// The deadline: one timer at a time, armed when a request's first byte
/// arrives and no timer is pending; a request that arrives in time leaves it
/// running rather than cancelling it. When it fires it closes the connection
/// only if a request has been awaited for `timeout` or longer; a later request
/// still arriving gets the timer again for the rest of its own time. A
/// kept-alive connection so costs a timer every `timeout`, not a scheduling and
/// a cancellation per request (those were 7% of the daemon's time under a
/// status-poll load).
///
/// The hang-up: waiting long polls are told when the client stops sending (it
/// closed its side, or the connection ended), so a poll whose answer nobody
/// will read lets go of its slot then. Hummingbird keeps half-closed
/// connections open, so the channel's own close would come only when the
/// answer is written. A poll's action leaves the list when it stops waiting,
/// so a kept-alive connection carrying many polls holds nothing per past poll.
final class ConnectionGuard: ChannelInboundHandler, RemovableChannelHandler, NIOScheduledCallbackHandler, @unchecked Sendable {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    /// What the connection's long polls wait on.
    let actions = HangUpActions()
    let timeout: TimeAmount
    /// When the request now awaited began to arrive; `nil` while none is
    /// arriving (between requests, or while one is answered): the next byte
    /// then starts a request that must arrive whole in time.
    private(set) var requestStarted: NIODeadline?
    /// The deadline's timer: a callback on the event loop to this handler,
    /// with no closure, promise or future of its own (about 200 bytes less
    /// than a scheduled task, for every connection whose request is under way).
    private var timer: NIOScheduledCallback?
    /// The connection, while the timer is armed.
    private var channel: (any Channel)?

    init(timeout: TimeAmount) {
        self.timeout = timeout
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if requestStarted == nil { requestBegins(on: context.channel) }
        context.fireChannelRead(data)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? ChannelEvent, event == .inputClosed { actions.hangUp() }
        context.fireUserInboundEventTriggered(event)
    }

    func channelInactive(context: ChannelHandlerContext) {
        timer?.cancel()
        timer = nil
        channel = nil
        actions.hangUp()
        context.fireChannelInactive()
    }

    /// A request's first byte arrived.
    func requestBegins(on channel: any Channel) {
        let now = NIODeadline.now()
        requestStarted = now
        if timer == nil { arm(at: now + timeout, on: channel) }
    }

    /// The whole request arrived (its `.end`), whether or not it was answered
    /// already: the next byte is the next request's.
    func requestArrived() {
        requestStarted = nil
    }

    private func arm(at deadline: NIODeadline, on channel: any Channel) {
        // Fails only while the event loop shuts down, which closes the connection anyway.
        guard let timer = try? channel.eventLoop.scheduleCallback(at: deadline, handler: self) else { return }
        self.timer = timer
        self.channel = channel
    }

    func handleScheduledCallback(eventLoop: some EventLoop) {
        let channel = channel
        timer = nil
        self.channel = nil
        guard let channel, let started = requestStarted else { return }
        if NIODeadline.now() >= started + timeout {
            channel.close(promise: nil)
        } else {
            arm(at: started + timeout, on: channel)
        }
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
    let deadline: ConnectionGuard

    init(deadline: ConnectionGuard) {
        self.deadline = deadline
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head where deadline.requestStarted == nil:
            // Its first bytes came in the read that ended the request before it, while
            // that one's deadline still ran: the connection's guard started none for it.
            deadline.requestBegins(on: context.channel)
        case .end:
            // The deadline covers the whole request: a body dribbled a byte at a time is cut too.
            deadline.requestArrived()
        default:
            break
        }
        context.fireChannelRead(data)
    }
}

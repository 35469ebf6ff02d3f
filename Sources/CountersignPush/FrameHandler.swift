import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOTLS

/// Writes each request as HEADERS and DATA frames and matches the answers' frames to their requests by stream id.
/// What it knows lives in one value, ``PushStreams``: each channel event becomes an event of that value, and the
/// ``PushStreams/Actions`` it returns are carried out here, the only place that touches the channel.
final class FrameHandler: ChannelInboundHandler, NIOHTTP2FrameDelegate {
    typealias InboundIn = HTTP2Frame
    typealias OutboundOut = HTTP2Frame

    let retired = RaisedFlag()
    private var state: PushStreams
    private var context: ChannelHandlerContext?
    private var sweep: Scheduled<Void>?

    init(streamBudget: Int) { self.state = PushStreams(streamBudget: streamBudget, now: .now()) }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func channelActive(context: ChannelHandlerContext) {
        // The connection's window, opened wide once; `userInboundEventTriggered` tops it up.
        context.writeAndFlush(
            wrapOutboundOut(
                HTTP2Frame(streamID: .rootStream, payload: .windowUpdate(windowSizeIncrement: PushStreams.connectionWindow - 65535))),
            promise: nil)
        scheduleSweep(context)
        context.fireChannelActive()
    }

    /// Also when the channel closes before it was ever active (a refused connect): no sweep is left behind.
    func handlerRemoved(context: ChannelHandlerContext) {
        run(state.failed(HTTP2PushClient.Failure("the connection closed"), close: false))
        sweep?.cancel()
        self.context = nil
    }

    func send(
        _ head: HPACKHeaders, body: ByteBuffer, deadline: NIODeadline, token: UInt64, promise: EventLoopPromise<HTTP2PushClient.Response>
    ) {
        // Closed (never so while the state takes requests: closing fails it first), the state refuses with its reason.
        if context == nil, state.takesRequests { run(state.failed(HTTP2PushClient.Failure("the connection closed"), close: false)) }
        run(state.send(head, body: body, deadline: deadline, token: token, promise: promise, now: .now()))
    }

    /// Called by swift-nio-http2 as each frame leaves.
    func wroteFrame(_ frame: HTTP2Frame) {
        run(state.wrote(frame))
    }

    /// The caller gave up: reset the stream and fail its request.
    func cancel(_ token: UInt64) {
        run(state.cancel(token))
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        run(state.read(unwrapInboundIn(data), now: .now()))
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        switch event {
        case let window as NIOHTTP2WindowUpdatedEvent where window.streamID == .rootStream:
            if let inbound = window.inboundWindowSize { run(state.windowShrank(to: inbound)) }
        case let closed as StreamClosedEvent:
            run(
                state.streamEnded(
                    closed.streamID,
                    HTTP2PushClient.Failure("the stream closed without an answer (\(closed.reason.map { "\($0)" } ?? "no reason"))")))
        case TLSUserEvent.handshakeCompleted(let negotiated) where negotiated != "h2":
            run(state.failed(HTTP2PushClient.Failure("the server does not offer HTTP/2 (ALPN: \(negotiated ?? "none"))", noHTTP2: true), close: true))
        default:
            break
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if let streamError = error as? NIOHTTP2Errors.StreamError {
            return run(state.streamEnded(streamError.streamID, HTTP2PushClient.Failure("stream error: \(streamError.baseError)")))
        }
        run(state.connectionError(error))
    }

    func channelInactive(context: ChannelHandlerContext) {
        run(state.failed(HTTP2PushClient.Failure("the connection closed"), close: false))
        self.context = nil
        context.fireChannelInactive()
    }

    /// Carries out what the state asked for, in ``PushStreams/Actions``' order.
    private func run(_ actions: PushStreams.Actions) {
        if actions.retire { retired.raise() }
        for (promise, result) in actions.completions { promise.completeWith(result) }
        guard let context else { return }
        for id in actions.resets {
            context.writeAndFlush(wrapOutboundOut(HTTP2Frame(streamID: id, payload: .rstStream(.cancel))), promise: nil)
        }
        if let increment = actions.windowUpdate {
            // Until this update has left (it may wait behind other frames), the window's count does not show it.
            let sent = context.eventLoop.makePromise(of: Void.self)
            sent.futureResult.assumeIsolated().whenComplete { _ in self.state.windowToppedUp() }
            context.writeAndFlush(
                wrapOutboundOut(HTTP2Frame(streamID: .rootStream, payload: .windowUpdate(windowSizeIncrement: increment))), promise: sent)
        }
        if let (id, head, body) = actions.write {
            context.write(wrapOutboundOut(HTTP2Frame(streamID: id, payload: .headers(.init(headers: head)))), promise: nil)
            // The DATA on a flush of its own: swift-nio-http2 holds it until a flush and then writes it right after
            // its HEADERS. ``FlushPerTurn`` below holds that flush to the end of the turn, for every request of it.
            context.writeAndFlush(
                wrapOutboundOut(HTTP2Frame(streamID: id, payload: .data(.init(data: .byteBuffer(body), endStream: true)))), promise: nil)
        }
        if actions.flush { context.flush() }
        if actions.close { context.close(promise: nil) }
    }

    /// Every 250 ms, one timer per connection and none per request (``PushStreams/sweep(now:)``).
    private func scheduleSweep(_ context: ChannelHandlerContext) {
        sweep = context.eventLoop.assumeIsolated().scheduleTask(in: .milliseconds(250)) {
            guard self.context != nil else { return }
            self.run(self.state.sweep(now: .now()))
            if self.context != nil { self.scheduleSweep(context) }
        }
    }
}

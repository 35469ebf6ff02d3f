import Foundation
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import NIOHTTP1
import NIOHTTPTypes
import NIOHTTPTypesHTTP1

/// HTTP/1.1 with the contract's connection limits: a connection with no
/// request in flight for `idleTimeout` is closed (``RequestCollector``), and
/// a request that has not fully arrived (head and body) `requestTimeout`
/// after its first byte is closed too, so a client trickling
/// headers or a body (slowloris) cannot hold a connection.
///
/// A connection holds no task of its own. Hummingbird's own HTTP/1 channel
/// runs each connection as one task, and a task keeps the deepest stack of
/// async frames it ever ran (about 1 KiB per frame) for as long as it lives:
/// 6.5 KiB of every open connection, idle or waiting. Here the pipeline is
/// NIO's, and each request, once it has fully arrived, runs through the router
/// in a short task of its own (``ConnectionResponder``); a long poll that must
/// wait is parked with the broker as a small record (`LongPollHandOff.swift`).
struct GuardedHTTP1Channel: ServerChildChannel {
    struct Value: ServerChildChannelValue {
        let channel: any Channel
    }
    let responder: RouterResponder<AppRequestContext>
    let idleTimeout: Duration
    let requestTimeout: TimeAmount
    let connections: ConnectionsPerAddress
    let open: OpenConnections
    let dates: HTTPDates
    let turns: LongPollTurns
    let accessLog: AccessLogMiddleware

    static func builder(
        responder: RouterResponder<AppRequestContext>, idleTimeout: Duration, requestTimeout: Duration, connections: ConnectionsPerAddress,
        open: OpenConnections, accessLog: AccessLogMiddleware
    ) -> HTTPServerBuilder {
        // The application's own responder is not used: it writes through the
        // async channel a connection here does not have. This one routes the same router.
        HTTPServerBuilder { _ in
            GuardedHTTP1Channel(
                responder: responder, idleTimeout: idleTimeout, requestTimeout: TimeAmount(requestTimeout), connections: connections,
                open: open, dates: HTTPDates(), turns: LongPollTurns(), accessLog: accessLog)
        }
    }

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        // Over its address's cap, a connection is closed before it reads a byte.
        let (admitted, key) = connections.admit(channel.remoteAddress)
        guard admitted else {
            channel.close(promise: nil)
            return channel.eventLoop.makeFailedFuture(ChannelError.ioOnClosedChannel)
        }
        if let key {
            let connections = connections
            channel.closeFuture.whenComplete { _ in connections.release(key) }
        }
        open.track(channel)
        return channel.eventLoop.makeCompletedFuture {
            let pipeline = channel.pipeline.syncOperations
            // A connection keeps its read buffer while it waits (NIO pools it); the
            // default starts at 2 KiB, where a request head is a few hundred bytes.
            // The buffer still grows, read by read, for larger requests.
            try channel.syncOptions?.setOption(ChannelOptions.recvAllocator, value: Self.readBuffers)
            let guards = ConnectionGuard(timeout: requestTimeout)
            // First: reading stops while the client does not read its answers
            // (the connection is not writable), so a client pipelining requests
            // it never reads the answers of cannot pile them up here.
            try pipeline.addHandler(BackPressureHandler())
            // The request deadline and the hang-up see the raw bytes, before the HTTP decoder.
            try pipeline.addHandler(guards)
            // One request at a time: the next one pipelined behind it is read
            // once this one's answer has ended. A malformed request is answered
            // 400 and the connection closed. The decoder's limits are Hummingbird's.
            try pipeline.configureHTTPServerPipeline(
                withPipeliningAssistance: true, withErrorHandling: true, withOutboundHeaderValidation: false, withEncoderConfiguration: .init(),
                withDecoderLimitConfiguration: Self.decoderLimits)
            try pipeline.addHandler(
                RequestWatcher(deadline: guards),
                position: .after(try pipeline.handler(type: ByteToMessageHandler<HTTPRequestDecoder>.self)))
            try pipeline.addHandler(HTTP1ToHTTPServerCodec(secure: false))
            // The idle timeout is the collector's (NIO's pipelining handler closes a
            // connection after its answer when the server quiesces).
            try pipeline.addHandler(
                RequestCollector(
                    responder: ConnectionResponder(
                        responder: responder, channel: channel, hangUp: guards.actions, logger: logger, dates: dates,
                        turns: turns, accessLog: accessLog),
                    idleTimeout: TimeAmount(idleTimeout)))
            return Value(channel: channel)
        }
    }

    static let readBuffers = AdaptiveRecvByteBufferAllocator(minimum: 64, initial: 512, maximum: 65536)

    static let decoderLimits = {
        var limits = NIOHTTPDecoderLimitConfiguration()
        limits.maxHeaderFieldSize = 80 * 1024
        limits.maxHeaderListSize = 80 * 1024
        limits.maxHeaderFieldCount = 1000
        return limits
    }()

    /// Nothing: the connection's requests run from its pipeline.
    func handle(value: Value, logger: Logger) async {}
}

/// Gathers each request (head and body) and hands it, whole, to the
/// connection's responder; closes the connection after an answer when the
/// client asked (`Connection: close`) or closed its side, and when it has
/// been idle for `idleTimeout`: no byte read and no answer under way (a
/// request being read is idle when its bytes stop; one being answered, a
/// waiting long poll too, is not).
///
/// The idle timer is a callback on the event loop to this handler, armed at
/// the connection's start and after each answer if none is pending; when it
/// fires early it is armed again for the rest of the time. Hummingbird's idle
/// handler did the same with a handler of its own and a scheduled task (a
/// closure, a promise and its future), for every open connection.
final class RequestCollector: ChannelDuplexHandler, RemovableChannelHandler, NIOScheduledCallbackHandler {
    typealias InboundIn = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    private let responder: ConnectionResponder
    private let idleTimeout: TimeAmount
    /// When a byte was last read or an answer last ended.
    private var lastActive = NIODeadline.now()
    private var idleTimer: NIOScheduledCallback?
    /// The handler's context, while the idle timer is armed.
    private var armedContext: ChannelHandlerContext?
    private var head: HTTPRequest?
    private var body: ByteBuffer?
    /// A request's answer has not ended yet.
    private var answering = false
    private var closeAfterResponse = false
    /// The client has closed its side.
    private var inputClosed = false
    /// The last answer is written: nothing more is read or answered.
    private var closing = false

    init(responder: ConnectionResponder, idleTimeout: TimeAmount) {
        self.responder = responder
        self.idleTimeout = idleTimeout
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { armIdleTimer(context, at: .now() + idleTimeout) }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        cancelIdleTimer()
    }

    func channelActive(context: ChannelHandlerContext) {
        armIdleTimer(context, at: .now() + idleTimeout)
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        cancelIdleTimer()
        context.fireChannelInactive()
    }

    private func armIdleTimer(_ context: ChannelHandlerContext, at deadline: NIODeadline) {
        guard idleTimer == nil else { return }
        // Fails only while the event loop shuts down, which closes the connection anyway.
        idleTimer = try? context.eventLoop.assumeIsolated().scheduleCallback(at: deadline, handler: self)
        if idleTimer != nil { armedContext = context }
    }

    private func cancelIdleTimer() {
        idleTimer?.cancel()
        idleTimer = nil
        armedContext = nil
    }

    func handleScheduledCallback(eventLoop: some EventLoop) {
        let context = armedContext
        idleTimer = nil
        armedContext = nil
        // An answer under way is not idle: the timer is armed again when it ends.
        guard let context, context.channel.isActive, !answering else { return }
        let due = lastActive + idleTimeout
        if NIODeadline.now() >= due {
            context.close(promise: nil)
        } else {
            armIdleTimer(context, at: due)
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        lastActive = .now()
        guard !closing else { return }
        switch unwrapInboundIn(data) {
        case .head(let head):
            body = nil
            if let declared = head.headerFields[.contentLength].flatMap(Int.init), declared > APILimits.maxBodyBytes {
                // Refused by its declared length (413) without waiting for the
                // body, which then arrives within the request deadline and is dropped.
                self.head = nil
                start(head, body: ByteBuffer(), context: context)
                return
            }
            self.head = head
            if head.headerFields[.expect]?.lowercased() == "100-continue" {
                context.writeAndFlush(wrapOutboundOut(.head(HTTPResponse(status: .continue))), promise: nil)
            }
        case .body(var part):
            guard head != nil else { return }
            // At most one byte past the limit is kept (a body with no declared
            // length): the route refuses it (413); the rest arrives within the
            // request deadline and is dropped.
            let room = APILimits.maxBodyBytes + 1 - (body?.readableBytes ?? 0)
            if room > 0, let kept = part.readSlice(length: min(room, part.readableBytes)) {
                body.setOrWriteImmutableBuffer(kept)
            }
        case .end:
            guard let head = head.take() else { return }
            start(head, body: body.take() ?? ByteBuffer(), context: context)
        }
    }

    private func start(_ head: HTTPRequest, body: ByteBuffer, context: ChannelHandlerContext) {
        answering = true
        if head.headerFields[.connection].map(Self.asksToClose) == true { closeAfterResponse = true }
        responder.start(Request(head: head, body: RequestBody(buffer: body)))
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        guard case .end = unwrapOutboundIn(data) else { return context.write(data, promise: promise) }
        answering = false
        lastActive = .now()
        if context.channel.isActive { armIdleTimer(context, at: lastActive + idleTimeout) }
        guard closeAfterResponse else { return context.write(data, promise: promise) }
        // The last answer: a request pipelined behind it is not started, and the
        // connection closes once the answer is out (its output only, while the
        // client may still be sending: closing both would reset the connection).
        closing = true
        let written = context.eventLoop.makePromise(of: Void.self)
        written.futureResult.cascade(to: promise)
        let inputClosed = inputClosed
        written.futureResult.whenComplete { _ in context.close(mode: inputClosed ? .all : .output, promise: nil) }
        context.writeAndFlush(data, promise: written)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? ChannelEvent, event == .inputClosed {
            inputClosed = true
            // The client will send nothing more: close once the answer in flight is written.
            if answering { closeAfterResponse = true } else { context.close(promise: nil) }
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // A malformed request (answered 400 before this handler) or a failed read: the connection ends.
        context.close(promise: nil)
    }

    static func asksToClose(_ connection: String) -> Bool {
        connection.split(separator: ",").contains { $0.trimmingCharacters(in: .whitespaces).lowercased() == "close" }
    }
}

import HTTPTypes
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import NIOHTTPTypes

/// HTTP/1.1 with the contract's connection limits: a connection with no
/// request in flight for `idleTimeout` is closed (Hummingbird's own idle
/// handler), and a request whose head has not fully arrived `headTimeout`
/// after its first byte is closed too, so a client trickling headers
/// (slowloris) cannot hold a connection.
struct GuardedHTTP1Channel: ServerChildChannel {
    typealias Value = HTTP1Channel.Value
    let responder: HTTPChannelHandler.Responder
    let idleTimeout: TimeAmount
    let headTimeout: TimeAmount

    static func builder(idleTimeout: Duration, headTimeout: Duration) -> HTTPServerBuilder {
        HTTPServerBuilder { responder in
            GuardedHTTP1Channel(responder: responder, idleTimeout: TimeAmount(idleTimeout), headTimeout: TimeAmount(headTimeout))
        }
    }

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        let deadline = HeadDeadline()
        let http1 = HTTP1Channel(
            responder: responder,
            configuration: .init(additionalChannelHandlers: [HeadWatcher(deadline: deadline)], idleTimeout: idleTimeout))
        let headTimeout = headTimeout
        return http1.setup(channel: channel, logger: logger).flatMapThrowing { value in
            // First in the pipeline: it sees the raw bytes, before the HTTP decoder.
            try channel.pipeline.syncOperations.addHandler(ByteWatcher(deadline: deadline, timeout: headTimeout), position: .first)
            return value
        }
    }

    func handle(value: Value, logger: Logger) async {
        await HTTP1Channel(responder: responder).handle(value: value, logger: logger)
    }
}

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

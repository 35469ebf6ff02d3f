import NIOCore

/// Between TLS and HTTP/2: the flushes asked for during one turn of the event loop become one, after it, so the
/// requests written in a turn leave in one TLS write instead of one each. The bytes leave in the order
/// swift-nio-http2 wrote them, as with a flush per request: a request's DATA right after its HEADERS, since
/// swift-nio-http2 holds the DATA until that request's own flush reaches it, above this handler. (Holding the
/// flush back in ``FrameHandler`` instead sent every HEADERS of a turn before any DATA: a server that answers
/// on HEADERS and resets the stream then saw DATA for streams reset long before, and ended the connection.
/// Streams queued by swift-nio-http2 for the server's stream limit, or while the socket is full, leave their
/// HEADERS before their DATA either way.) A close asked for while a flush is held flushes first, so a GOAWAY
/// or RST_STREAM written just before it still leaves.
final class FlushPerTurn: ChannelOutboundHandler {
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private var pending = false
    private var removed = false

    func flush(context: ChannelHandlerContext) {
        guard !pending else { return }
        pending = true
        context.eventLoop.assumeIsolated().execute {
            self.pending = false
            if !self.removed { context.flush() }
        }
    }

    func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        if pending { context.flush() }
        context.close(mode: mode, promise: promise)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        removed = true
    }
}

import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOPosix
import NIOSSL

/// A measurement, not the daemon's push client: HTTP/2 requests written as
/// frames on the connection itself, through swift-nio-http2's connection
/// handler (framing, HPACK, stream states, outbound flow control), without a
/// child channel per stream, and with one flush for all the requests written
/// in the same event-loop turn. It answers how fast a client built that way
/// could push to the benchmark's stub beside AsyncHTTPClient; it does not
/// handle what a real client must (GOAWAY's last stream, reconnection, stream
/// ids running out, timeouts).
final class FrameClient: Sendable {
    let channel: any Channel
    private let handler: NIOLoopBound<FrameClientHandler>

    private init(channel: any Channel, handler: NIOLoopBound<FrameClientHandler>) {
        self.channel = channel
        self.handler = handler
    }

    static func connect(host: String, port: Int, caFile: String) async throws -> FrameClient {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.additionalTrustRoots = [.file(caFile)]
        tls.applicationProtocols = ["h2"]
        let context = try NIOSSLContext(configuration: tls)
        let eventLoop = MultiThreadedEventLoopGroup.singleton.any()
        let channel = try await ClientBootstrap(group: eventLoop)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(NIOSSLClientHandler(context: context, serverHostname: nil))
                    try channel.pipeline.syncOperations.addHandler(NIOHTTP2Handler(mode: .client))
                    try channel.pipeline.syncOperations.addHandler(FrameClientHandler())
                }
            }
            .connect(host: host, port: port).get()
        let handler = try await channel.eventLoop.submit {
            NIOLoopBound(try channel.pipeline.syncOperations.handler(type: FrameClientHandler.self), eventLoop: channel.eventLoop)
        }.get()
        return FrameClient(channel: channel, handler: handler)
    }

    /// Sends one request; returns the answer's status once its stream ends.
    func send(headers: HPACKHeaders, body: ByteBuffer) async throws -> Int {
        let promise = channel.eventLoop.makePromise(of: Int.self)
        let handler = handler
        channel.eventLoop.execute { handler.value.send(headers: headers, body: body, promise: promise) }
        return try await promise.futureResult.get()
    }

    /// Closes the connection; nginx may close its side first, without TLS close_notify, which is no failure here.
    func close() async { try? await channel.close() }
}

final class FrameClientHandler: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame
    typealias OutboundOut = HTTP2Frame

    private struct Pending {
        let promise: EventLoopPromise<Int>
        var status: Int?
    }

    private var pending: [HTTP2StreamID: Pending] = [:]
    private var nextStreamID: Int32 = 1
    private var context: ChannelHandlerContext?
    private var flushScheduled = false
    /// Connection-level bytes received since the last WINDOW_UPDATE: without a
    /// stream multiplexer nothing else gives the window back.
    private var unacknowledged = 0

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }

    func send(headers: HPACKHeaders, body: ByteBuffer, promise: EventLoopPromise<Int>) {
        guard let context else { return promise.fail(ChannelError.ioOnClosedChannel) }
        let id = HTTP2StreamID(nextStreamID)
        nextStreamID += 2
        pending[id] = Pending(promise: promise)
        context.write(wrapOutboundOut(HTTP2Frame(streamID: id, payload: .headers(.init(headers: headers)))), promise: nil)
        context.write(wrapOutboundOut(HTTP2Frame(streamID: id, payload: .data(.init(data: .byteBuffer(body), endStream: true)))), promise: nil)
        flushLater(context)
    }

    /// One flush for everything written in this event-loop turn.
    private func flushLater(_ context: ChannelHandlerContext) {
        guard !flushScheduled else { return }
        flushScheduled = true
        context.eventLoop.assumeIsolated().execute {
            self.flushScheduled = false
            context.flush()
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        switch frame.payload {
        case .headers(let headers):
            if let status = headers.headers.first(name: ":status").flatMap(Int.init) { pending[frame.streamID]?.status = status }
            if headers.endStream { finish(frame.streamID) }
        case .data(let data):
            unacknowledged += data.data.readableBytes + (data.paddingBytes ?? 0)
            if unacknowledged >= 32768 {
                context.write(wrapOutboundOut(HTTP2Frame(streamID: .rootStream, payload: .windowUpdate(windowSizeIncrement: unacknowledged))), promise: nil)
                unacknowledged = 0
                flushLater(context)
            }
            if data.endStream { finish(frame.streamID) }
        case .rstStream:
            // A complete answer then RST_STREAM(NO_ERROR) is a success (RFC 9113 §8.1).
            if pending[frame.streamID]?.status != nil { finish(frame.streamID) } else { fail(frame.streamID) }
        case .goAway:
            for id in Array(pending.keys) { fail(id) }
        default:
            break
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        for id in Array(pending.keys) { fail(id) }
        self.context = nil
    }

    private func finish(_ id: HTTP2StreamID) {
        guard let done = pending.removeValue(forKey: id) else { return }
        if let status = done.status { done.promise.succeed(status) } else { done.promise.fail(ChannelError.inputClosed) }
    }

    private func fail(_ id: HTTP2StreamID) {
        pending.removeValue(forKey: id)?.promise.fail(ChannelError.inputClosed)
    }
}

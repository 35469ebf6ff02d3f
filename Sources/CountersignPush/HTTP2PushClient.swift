import Foundation
import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOPosix
import NIOSSL
import NIOTLS
import Synchronization

/// The HTTP/2 client FCM sends go out on: requests written as frames on the
/// connection itself through swift-nio-http2's connection handler (framing,
/// HPACK, stream states, the server's stream limit, outbound flow control),
/// without a channel per stream or a timer per request, the requests of one
/// event-loop turn flushed together (``FlushPerTurn``). On the benchmark's stub it sends more than twice
/// what AsyncHTTPClient does with the same connections and streams
/// (`benchmarks/suite.py --rows pushclients`).
///
/// A few connections (`connections`), taken in turn. A connection that the
/// server sends GOAWAY on, that closes, or that has opened
/// `streamsPerConnection` streams takes no new request; its open streams
/// finish, then it closes, and the next request opens another. Requests the
/// server did not process (above GOAWAY's last stream) fail, to be retried; a
/// GOAWAY with an error code fails every open request and closes the connection.
/// A request has a deadline, enforced by a sweep every 250 ms per
/// connection, not a timer of its own; a cancelled request resets its stream.
public final class HTTP2PushClient: Sendable {
    /// A complete answer: its status, header fields and body (at most ``maximumBody`` bytes).
    public struct Response: Sendable {
        public let status: Int
        public let headers: HPACKHeaders
        public let body: ByteBuffer
    }

    /// A transport failure: the request may not have been processed; worth a retry.
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
        /// Nothing was written: the connection had stopped taking requests.
        let unsent: Bool
        /// The server offered no HTTP/2 in the TLS handshake (a middlebox that speaks only HTTP/1.1).
        public let noHTTP2: Bool
        init(_ description: String, unsent: Bool = false, noHTTP2: Bool = false) {
            self.description = description
            self.unsent = unsent
            self.noHTTP2 = noHTTP2
        }
    }

    /// The largest answer body read; a longer one fails the request.
    public static let maximumBody = 64 * 1024

    let host: String
    let port: Int
    /// `host:port`, the `:authority` of every request.
    let authority: String
    /// The endpoint's own path, before every request's (empty for `https://fcm.googleapis.com`).
    let basePath: String
    private let tls: NIOSSLContext
    private let serverHostname: String?
    private let streamsPerConnection: Int
    private let connectTimeout: TimeAmount
    private let slots: Mutex<Slots>
    private let slotCount: Int

    private struct Slots {
        var all: [Slot]
        var next = 0
        var closed = false
        /// Every connection made and not yet seen closed, draining ones included: shutdown closes them all.
        var live: [ObjectIdentifier: FrameConnection] = [:]
        /// Connections being opened, closed as soon as they are up if shutdown came first.
        var attempts: [ObjectIdentifier: Attempt] = [:]
    }

    private enum Slot {
        case empty
        case connecting(Attempt)
        case ready(FrameConnection)
    }

    /// One connection being opened, shared by the requests that wait for it.
    private final class Attempt: Sendable {
        let future: EventLoopFuture<FrameConnection>
        init(_ future: EventLoopFuture<FrameConnection>) { self.future = future }
    }

    /// - Parameters:
    ///   - endpoint: `https://HOST[:PORT]`; the server must offer HTTP/2 (ALPN `h2`).
    ///   - caFile: a CA trusted besides the system's roots.
    ///   - streamsPerConnection: streams one connection opens before the next request takes a new one. A server
    ///     may end every answered stream with RST_STREAM(NO_ERROR), and swift-nio-http2 counts each reset it
    ///     receives; its limit is raised above this, so such a server never looks like an attack.
    public init(
        endpoint: String, caFile: String?, connections: Int = 2, streamsPerConnection: Int = 20000, connectTimeout: TimeAmount = .seconds(10)
    ) throws {
        guard let url = URL(string: endpoint), url.scheme?.lowercased() == "https", let host = url.host, !host.isEmpty else {
            throw Failure("\(endpoint) is not an https:// address")
        }
        self.host = host
        self.port = url.port ?? 443
        let bracketed = host.contains(":") && !host.hasPrefix("[") ? "[\(host)]" : host
        self.authority = url.port.map { "\(bracketed):\($0)" } ?? bracketed
        self.basePath = url.path.hasSuffix("/") ? String(url.path.dropLast()) : url.path
        var configuration = TLSConfiguration.makeClientConfiguration()
        if let caFile {
            guard FileManager.default.isReadableFile(atPath: caFile) else { throw ServiceAccountError("cannot read the CA file \(caFile)") }
            configuration.additionalTrustRoots = [.file(caFile)]
        }
        configuration.applicationProtocols = ["h2"]
        self.tls = try NIOSSLContext(configuration: configuration)
        // An address is checked against the certificate's IP entries; a name is sent as SNI and checked.
        let bare = host.hasPrefix("[") ? String(host.dropFirst().dropLast()) : host
        self.serverHostname = (try? SocketAddress(ipAddress: bare, port: 0)) == nil ? host : nil
        self.streamsPerConnection = max(1, streamsPerConnection)
        self.connectTimeout = connectTimeout
        self.slotCount = max(1, connections)
        self.slots = Mutex(Slots(all: Array(repeating: .empty, count: max(1, connections))))
    }

    /// Sends one request and returns its answer, whatever its status; throws ``Failure`` when no complete
    /// answer came (connection lost or refused, stream reset, deadline passed), `CancellationError` when cancelled.
    /// `headers` are written as given: their names in lowercase, as HTTP/2 requires.
    public func post(path: String, headers: [(String, String)], body: ByteBuffer, timeout: TimeAmount) async throws -> Response {
        var head: HPACKHeaders = [":method": "POST", ":scheme": "https", ":authority": authority, ":path": basePath + path]
        for (name, value) in headers { head.add(name: name, value: value) }
        head.add(name: "content-length", value: "\(body.readableBytes)")
        let deadline = NIODeadline.now() + timeout
        // A connection that stopped taking requests (GOAWAY, its budget, idle) as this one came: the next takes it.
        // Bounded: every slot may have stopped at once.
        var attempt = 0
        while true {
            do {
                return try await connection().send(head, body: body, deadline: deadline)
            } catch let failure as Failure where failure.unsent && !failure.noHTTP2 && attempt < slotCount {
                attempt += 1
            }
        }
    }

    /// Connections open now, for the health of tests and benchmarks.
    public var openConnections: Int {
        slots.withLock { slots in slots.all.filter { if case .ready(let connection) = $0 { connection.isUsable } else { false } }.count }
    }

    /// Closes every connection, draining ones and ones still being opened too; requests in flight fail.
    public func shutdown() async {
        let (open, opening): ([FrameConnection], [Attempt]) = slots.withLock { slots in
            slots.closed = true
            slots.all = slots.all.map { _ in .empty }
            defer { slots.live = [:] }
            return (Array(slots.live.values), Array(slots.attempts.values))
        }
        for attempt in opening { attempt.future.whenSuccess { $0.channel.close(promise: nil) } }
        await withTaskGroup(of: Void.self) { group in
            for connection in open { group.addTask { try? await connection.channel.close() } }
        }
    }

    private func connection() async throws -> FrameConnection {
        enum Pick {
            case use(FrameConnection)
            case wait(Attempt)
        }
        let pick: Pick = try slots.withLock { slots in
            guard !slots.closed else { throw Failure("the push client is shut down") }
            let count = slots.all.count
            let first = slots.next % count
            slots.next &+= 1
            // A ready connection first, from this request's turn on; else this turn's slot, to open or wait for.
            for step in 0..<count {
                if case .ready(let connection) = slots.all[(first + step) % count], connection.isUsable { return .use(connection) }
            }
            let index = first
            switch slots.all[index] {
            case .ready(let connection) where connection.isUsable:
                return .use(connection)
            case .connecting(let attempt):
                return .wait(attempt)
            case .empty, .ready:
                let attempt = Attempt(connect())
                slots.all[index] = .connecting(attempt)
                slots.attempts[ObjectIdentifier(attempt)] = attempt
                attempt.future.whenComplete { [weak self] result in self?.settle(index, attempt, result) }
                return .wait(attempt)
            }
        }
        switch pick {
        case .use(let connection): return connection
        case .wait(let attempt): return try await attempt.future.get()
        }
    }

    /// A connection attempt ended: its slot holds the connection, or is empty again to be tried by the next request.
    private func settle(_ index: Int, _ attempt: Attempt, _ result: Result<FrameConnection, any Error>) {
        let late: FrameConnection? = slots.withLock { slots in
            slots.attempts[ObjectIdentifier(attempt)] = nil
            if case .success(let connection) = result {
                // Shut down meanwhile: closed at once (shutdown also closes it), and no request may use it.
                if slots.closed { return connection }
                slots.live[ObjectIdentifier(connection)] = connection
            }
            guard case .connecting(let current) = slots.all[index], current === attempt else { return nil }
            switch result {
            case .success(let connection): slots.all[index] = .ready(connection)
            case .failure: slots.all[index] = .empty
            }
            return nil
        }
        if let late {
            late.retired.raise()
            late.channel.close(promise: nil)
        }
        if case .success(let connection) = result {
            connection.channel.closeFuture.whenComplete { [weak self] _ in
                _ = self?.slots.withLock { $0.live.removeValue(forKey: ObjectIdentifier(connection)) }
            }
        }
    }

    private func connect() -> EventLoopFuture<FrameConnection> {
        let tls = tls
        let serverHostname = serverHostname
        let streams = streamsPerConnection
        return ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connectTimeout(connectTimeout)
            .channelOption(ChannelOptions.socketOption(.tcp_nodelay), value: 1)
            .channelOption(ChannelOptions.socketOption(.so_keepalive), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(NIOSSLClientHandler(context: tls, serverHostname: serverHostname))
                    try Self.addFrameHandlers(to: channel.pipeline.syncOperations, streamBudget: streams)
                }
            }
            .connect(host: host, port: port)
            .flatMapThrowing { channel in
                FrameConnection(channel: channel, handler: try channel.pipeline.syncOperations.handler(type: FrameHandler.self))
            }
    }

    /// What a connection's pipeline holds above TLS: flushes held to one per turn, swift-nio-http2's connection
    /// handler, and the handler that writes requests and reads their answers (returned).
    @discardableResult
    static func addFrameHandlers(to pipeline: ChannelPipeline.SynchronousOperations, streamBudget streams: Int) throws -> FrameHandler {
        var connection = NIOHTTP2Handler.ConnectionConfiguration()
        // No server push; each stream's window above the longest answer read, so that a longer one is refused, not stalled.
        connection.initialSettings =
            nioDefaultSettings + [
                HTTP2Setting(parameter: .enablePush, value: 0),
                HTTP2Setting(parameter: .initialWindowSize, value: 2 * HTTP2PushClient.maximumBody),
            ]
        // Frames for a stream we reset (a deadline passed for many at once) are ignored, not a connection error.
        connection.maximumRecentlyResetStreams = 4096
        var stream = NIOHTTP2Handler.StreamConfiguration()
        // Every answered stream may be reset with NO_ERROR; a connection opens at most `streams`.
        stream.streamResetFrameRateLimit.maximumCount = streams + 200
        let handler = FrameHandler(streamBudget: streams)
        try pipeline.addHandler(FlushPerTurn())
        try pipeline.addHandler(
            NIOHTTP2Handler(mode: .client, frameDelegate: handler, connectionConfiguration: connection, streamConfiguration: stream))
        try pipeline.addHandler(handler)
        return handler
    }
}

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

/// Writes each request as HEADERS and DATA frames and matches the answers'
/// frames to their requests by stream id.
final class FrameHandler: ChannelInboundHandler, NIOHTTP2FrameDelegate {
    typealias InboundIn = HTTP2Frame
    typealias OutboundOut = HTTP2Frame

    private struct Stream {
        let promise: EventLoopPromise<HTTP2PushClient.Response>
        let deadline: NIODeadline
        let token: UInt64
        let written = NIODeadline.now()
        var status: Int?
        var headers: HPACKHeaders = [:]
        var body: ByteBuffer?
    }

    let retired = RaisedFlag()
    private let streamBudget: Int
    private var streams: [HTTP2StreamID: Stream] = [:]
    private var byToken: [UInt64: HTTP2StreamID] = [:]
    private var nextStreamID: Int32 = 1
    private var opened = 0
    private var context: ChannelHandlerContext?
    /// Streams whose HEADERS have left; the others wait in swift-nio-http2's queue for the server's stream limit.
    private var onWire: Set<HTTP2StreamID> = []
    /// swift-nio-http2 wrote a GOAWAY of its own: a connection error, after which it only waits to be closed.
    private var wentAway = false
    /// A WINDOW_UPDATE is written and not yet out: no second one on top of it.
    private var topUpPending = false
    /// GOAWAY came, the budget is spent, or the connection failed: no new stream.
    private var draining = false
    /// Why the connection failed, for the requests that come after.
    private var closedBecause: HTTP2PushClient.Failure?
    /// When the connection last read anything, and when it last had no stream: a deadline passing with
    /// nothing read since its request was written means the connection is silent; one idle a minute is closed.
    private var lastRead = NIODeadline.now()
    private var idleSince: NIODeadline? = .now()
    private var sweep: Scheduled<Void>?
    static let idleLimit = TimeAmount.seconds(60)
    /// The connection's receive window is kept at this: without a stream multiplexer nothing else gives it back.
    static let connectionWindow = 1 << 24

    init(streamBudget: Int) { self.streamBudget = streamBudget }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func channelActive(context: ChannelHandlerContext) {
        // The connection's window, opened wide once; `userInboundEventTriggered` tops it up.
        context.writeAndFlush(
            wrapOutboundOut(HTTP2Frame(streamID: .rootStream, payload: .windowUpdate(windowSizeIncrement: Self.connectionWindow - 65535))),
            promise: nil)
        scheduleSweep(context)
        context.fireChannelActive()
    }

    /// Also when the channel closes before it was ever active (a refused connect): no sweep is left behind.
    func handlerRemoved(context: ChannelHandlerContext) {
        failAll(HTTP2PushClient.Failure("the connection closed"))
        sweep?.cancel()
        self.context = nil
    }

    func send(
        _ head: HPACKHeaders, body: ByteBuffer, deadline: NIODeadline, token: UInt64, promise: EventLoopPromise<HTTP2PushClient.Response>
    ) {
        guard let context, !draining else {
            let reason = closedBecause
            return promise.fail(
                HTTP2PushClient.Failure(reason?.description ?? "the connection takes no new request", unsent: true, noHTTP2: reason?.noHTTP2 ?? false)
            )
        }
        let id = HTTP2StreamID(nextStreamID)
        nextStreamID += 2
        opened += 1
        if opened >= streamBudget || nextStreamID > Int32.max - 2 { stopTakingRequests() }
        streams[id] = Stream(promise: promise, deadline: deadline, token: token)
        byToken[token] = id
        idleSince = nil
        context.write(wrapOutboundOut(HTTP2Frame(streamID: id, payload: .headers(.init(headers: head)))), promise: nil)
        // The DATA on a flush of its own: swift-nio-http2 holds it until a flush and then writes it right after
        // its HEADERS. ``FlushPerTurn`` below holds that flush to the end of the turn, for every request of it.
        context.writeAndFlush(
            wrapOutboundOut(HTTP2Frame(streamID: id, payload: .data(.init(data: .byteBuffer(body), endStream: true)))), promise: nil)
    }

    /// Called by swift-nio-http2 as each frame leaves.
    func wroteFrame(_ frame: HTTP2Frame) {
        switch frame.payload {
        case .headers: onWire.insert(frame.streamID)
        case .goAway where frame.streamID == .rootStream:
            wentAway = true
            stopTakingRequests()
        default: break
        }
    }

    /// The caller gave up: reset the stream and fail its request.
    func cancel(_ token: UInt64) {
        guard let id = byToken[token] else { return }
        reset(id, CancellationError())
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        lastRead = .now()
        switch frame.payload {
        case .headers(let headers):
            guard var stream = streams[frame.streamID] else { return }
            let status = headers.headers.first(name: ":status").flatMap { Int($0) }
            if stream.status == nil {
                // 1xx answers come before the real one.
                guard let status, status >= 200 else { return }
                stream.status = status
                stream.headers = headers.headers
                streams[frame.streamID] = stream
            }
            if headers.endStream { finish(frame.streamID) }
        case .data(let data):
            guard var stream = streams[frame.streamID] else { return }
            guard case .byteBuffer(var bytes) = data.data else { return }
            if (stream.body?.readableBytes ?? 0) + bytes.readableBytes > HTTP2PushClient.maximumBody {
                return reset(frame.streamID, HTTP2PushClient.Failure("an answer longer than \(HTTP2PushClient.maximumBody) bytes"))
            }
            streams[frame.streamID] = nil  // no copy of the body while it grows
            if stream.body == nil { stream.body = bytes } else { stream.body!.writeBuffer(&bytes) }
            streams[frame.streamID] = stream
            if data.endStream { finish(frame.streamID) }
        case .rstStream(let code):
            // A stream answered completely has already finished; one reset before its end has no answer
            // (REFUSED_STREAM: not processed at all, so another connection may take it at once).
            fail(frame.streamID, HTTP2PushClient.Failure("the server reset the stream (\(code))", unsent: code == .refusedStream))
        case .goAway(_, let code, _) where code != .noError:
            // A connection error: the server answers nothing more on this connection and must close it (RFC 9113
            // §5.4.1), which it may not do. The requests still open fail now (they may have been processed) and
            // go elsewhere, rather than waiting out their deadlines on a connection that is dead.
            failAll(HTTP2PushClient.Failure("the server ended the connection with an error (GOAWAY \(code))"))
            context.close(promise: nil)
        case .goAway(let lastStreamID, let code, _):
            stopTakingRequests()
            for id in streams.keys where id > lastStreamID {
                fail(id, HTTP2PushClient.Failure("the server is closing the connection (GOAWAY \(code)) before this request", unsent: true))
            }
            // Requests still queued for the server's stream limit must not open a stream after GOAWAY (a connection
            // error): each is reset while queued, which drops it without a byte sent, and goes elsewhere.
            for id in streams.keys where !onWire.contains(id) {
                reset(id, HTTP2PushClient.Failure("the server is closing the connection (GOAWAY \(code))", unsent: true))
            }
            closeIfDone()
        default:
            break
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        switch event {
        case let window as NIOHTTP2WindowUpdatedEvent where window.streamID == .rootStream:
            // Received bytes count against the window whether or not they reach this handler (a reset stream's).
            if let inbound = window.inboundWindowSize, inbound < Self.connectionWindow / 2, !topUpPending {
                // Until this update has left (it may wait behind other frames), the count does not show it.
                topUpPending = true
                let sent = context.eventLoop.makePromise(of: Void.self)
                sent.futureResult.assumeIsolated().whenComplete { _ in self.topUpPending = false }
                context.writeAndFlush(
                    wrapOutboundOut(HTTP2Frame(streamID: .rootStream, payload: .windowUpdate(windowSizeIncrement: Self.connectionWindow - inbound))),
                    promise: sent)
            }
        case let closed as StreamClosedEvent:
            // A stream the library closed itself (a malformed answer): no answer will come.
            fail(closed.streamID, HTTP2PushClient.Failure("the stream closed without an answer (\(closed.reason.map { "\($0)" } ?? "no reason"))"))
        case TLSUserEvent.handshakeCompleted(let negotiated) where negotiated != "h2":
            failAll(HTTP2PushClient.Failure("the server does not offer HTTP/2 (ALPN: \(negotiated ?? "none"))", noHTTP2: true))
            context.close(promise: nil)
        default:
            break
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if let streamError = error as? NIOHTTP2Errors.StreamError {
            return fail(streamError.streamID, HTTP2PushClient.Failure("stream error: \(streamError.baseError)"))
        }
        // An HTTP/2 error without a GOAWAY of the library's own concerns one received answer: that stream is
        // reset, and its close event fails its request alone. A connection error (GOAWAY written) or any
        // other (TLS, I/O) ends the connection, which swift-nio-http2 leaves to us to close.
        if error is any NIOHTTP2Error, !wentAway {
            // The library's reset of that stream waits in its buffer for a flush; out, it closes the stream.
            return context.flush()
        }
        failAll(HTTP2PushClient.Failure("connection failed: \(error)"))
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        failAll(HTTP2PushClient.Failure("the connection closed"))
        self.context = nil
        context.fireChannelInactive()
    }

    private func stopTakingRequests() {
        draining = true
        retired.raise()
    }

    private func finish(_ id: HTTP2StreamID) {
        guard let stream = remove(id) else { return }
        if let status = stream.status {
            stream.promise.succeed(.init(status: status, headers: stream.headers, body: stream.body ?? ByteBuffer()))
        } else {
            stream.promise.fail(HTTP2PushClient.Failure("the stream ended without an answer"))
        }
        closeIfDone()
    }

    private func fail(_ id: HTTP2StreamID, _ error: any Error) {
        remove(id)?.promise.fail(error)
        closeIfDone()
    }

    /// Fails the request of a stream still open and resets the stream (failed first: the reset closes the
    /// stream at once, and its closing must not fail the request with another reason).
    private func reset(_ id: HTTP2StreamID, _ error: any Error) {
        guard let context, let stream = remove(id) else { return }
        stream.promise.fail(error)
        context.writeAndFlush(wrapOutboundOut(HTTP2Frame(streamID: id, payload: .rstStream(.cancel))), promise: nil)
        closeIfDone()
    }

    private func failAll(_ error: HTTP2PushClient.Failure) {
        stopTakingRequests()
        closedBecause = closedBecause ?? error
        for id in Array(streams.keys) { remove(id)?.promise.fail(error) }
    }

    @discardableResult
    private func remove(_ id: HTTP2StreamID) -> Stream? {
        guard let stream = streams.removeValue(forKey: id) else { return nil }
        byToken[stream.token] = nil
        onWire.remove(id)
        if streams.isEmpty { idleSince = .now() }
        return stream
    }

    /// A connection that takes no new request closes once its last stream is done.
    private func closeIfDone() {
        if draining, streams.isEmpty, let context { context.close(promise: nil) }
    }

    /// Every 250 ms, one timer per connection and none per request: requests past their deadline are reset and
    /// failed (and a connection that read nothing since such a request was written takes no more: it may be
    /// dead without knowing, behind a NAT that forgot it); a connection idle for a minute is closed.
    private func scheduleSweep(_ context: ChannelHandlerContext) {
        sweep = context.eventLoop.assumeIsolated().scheduleTask(in: .milliseconds(250)) {
            guard self.context != nil else { return }
            let now = NIODeadline.now()
            for (id, stream) in self.streams where stream.deadline <= now {
                if self.lastRead < stream.written { self.stopTakingRequests() }
                self.reset(id, HTTP2PushClient.Failure("no answer before the request's deadline"))
            }
            if let idleSince = self.idleSince, now - idleSince >= Self.idleLimit {
                self.stopTakingRequests()
                self.closeIfDone()
            }
            if self.context != nil { self.scheduleSweep(context) }
        }
    }
}

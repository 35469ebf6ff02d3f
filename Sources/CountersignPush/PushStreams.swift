import NIOCore
import NIOHPACK
import NIOHTTP2

/// The streams of one push connection and whether it takes new ones: a value, changed only by the events its
/// ``FrameHandler`` feeds it (a request to send, a frame read or written, a sweep, the connection failing), each
/// returning the ``Actions`` the handler then carries out (write, reset, complete, close), in the style of
/// AsyncHTTPClient's HTTP/2 connection state machine. Nothing here touches the channel or reads a clock: the
/// time of each event is given, so tests drive it with their own.
struct PushStreams {
    typealias Promise = EventLoopPromise<HTTP2PushClient.Response>
    typealias Failure = HTTP2PushClient.Failure

    /// Whether the connection takes new requests, and why not.
    enum Intake {
        /// Takes requests.
        case open
        /// GOAWAY came, the stream budget is spent, or the connection went silent or idle: no new stream; the open
        /// ones finish, then the connection closes.
        case draining
        /// swift-nio-http2 wrote a GOAWAY of its own (a connection error): it only waits to be closed.
        case wentAway
        /// The connection failed or closed; later requests are refused with this reason.
        case failed(Failure)
    }

    /// The receive window of the connection, which nothing but this keeps open (there is no stream multiplexer).
    enum Window {
        case steady
        /// A WINDOW_UPDATE is written and not yet out: the window's count does not show it yet, so no second one.
        case toppingUp
    }

    struct Stream {
        let promise: Promise
        let deadline: NIODeadline
        let token: UInt64
        let written: NIODeadline
        /// Its HEADERS have left; until then it waits in swift-nio-http2's queue for the server's stream limit.
        var onWire = false
        var status: Int?
        var headers: HPACKHeaders = [:]
        var body: ByteBuffer?
    }

    /// What the handler does after an event, in this order: raise the connection's retired flag, complete the
    /// requests (their streams are already gone from the state, so a completion that sends again sees it as it
    /// is), reset streams, top up the window, write the request, flush, close.
    struct Actions {
        var retire = false
        var completions: [(Promise, Result<HTTP2PushClient.Response, any Error>)] = []
        var resets: [HTTP2StreamID] = []
        var windowUpdate: Int?
        var write: (id: HTTP2StreamID, head: HPACKHeaders, body: ByteBuffer)?
        var flush = false
        var close = false
    }

    static let idleLimit = TimeAmount.seconds(60)
    /// The connection's receive window is kept at this.
    static let connectionWindow = 1 << 24

    let streamBudget: Int
    private(set) var intake = Intake.open
    private(set) var window = Window.steady
    private(set) var streams: [HTTP2StreamID: Stream] = [:]
    private var byToken: [UInt64: HTTP2StreamID] = [:]
    private var nextStreamID: Int32 = 1
    private var opened = 0
    /// When the connection last read anything, and since when (as the sweep saw it) it has had no stream: a deadline
    /// passing with nothing read since its request was written means the connection is silent; one idle a minute is
    /// closed.
    private var lastRead: NIODeadline
    private var idleSince: NIODeadline?

    init(streamBudget: Int, now: NIODeadline) {
        self.streamBudget = streamBudget
        self.lastRead = now
        self.idleSince = now
    }

    var takesRequests: Bool {
        if case .open = intake { true } else { false }
    }

    private var wentAway: Bool {
        if case .wentAway = intake { true } else { false }
    }

    // MARK: Events

    /// A request to send: a stream of its own, or refused (unsent: another connection may take it).
    mutating func send(
        _ head: HPACKHeaders, body: ByteBuffer, deadline: NIODeadline, token: UInt64, promise: Promise, now: NIODeadline
    )
        -> Actions
    {
        var actions = Actions()
        guard takesRequests else {
            let reason: Failure? = if case .failed(let failure) = intake { failure } else { nil }
            actions.completions.append(
                (
                    promise,
                    .failure(Failure(reason?.description ?? "the connection takes no new request", unsent: true, noHTTP2: reason?.noHTTP2 ?? false))
                ))
            return actions
        }
        let id = HTTP2StreamID(nextStreamID)
        nextStreamID += 2
        opened += 1
        if opened >= streamBudget || nextStreamID > Int32.max - 2 { drain(&actions) }
        streams[id] = Stream(promise: promise, deadline: deadline, token: token, written: now)
        byToken[token] = id
        idleSince = nil
        actions.write = (id, head, body)
        return actions
    }

    /// The caller gave up: its stream is reset and its request fails.
    mutating func cancel(_ token: UInt64) -> Actions {
        var actions = Actions()
        if let id = byToken[token] { reset(id, CancellationError(), &actions) }
        return actions
    }

    /// A frame left: a stream's HEADERS (it is on the wire), or swift-nio-http2's own GOAWAY.
    mutating func wrote(_ frame: HTTP2Frame) -> Actions {
        var actions = Actions()
        switch frame.payload {
        case .headers: streams[frame.streamID]?.onWire = true
        case .goAway where frame.streamID == .rootStream:
            if case .failed = intake {} else { intake = .wentAway }
            actions.retire = true
        default: break
        }
        return actions
    }

    /// A frame read from the server.
    mutating func read(_ frame: HTTP2Frame, now: NIODeadline) -> Actions {
        var actions = Actions()
        lastRead = now
        switch frame.payload {
        case .headers(let headers):
            guard var stream = streams[frame.streamID] else { break }
            if stream.status == nil {
                // 1xx answers come before the real one.
                guard let status = headers.headers.first(name: ":status").flatMap({ Int($0) }), status >= 200 else { break }
                stream.status = status
                stream.headers = headers.headers
                streams[frame.streamID] = stream
            }
            if headers.endStream { finish(frame.streamID, &actions) }
        case .data(let data):
            guard case .byteBuffer(var bytes) = data.data, var stream = streams[frame.streamID] else { break }
            if (stream.body?.readableBytes ?? 0) + bytes.readableBytes > HTTP2PushClient.maximumBody {
                reset(frame.streamID, Failure("an answer longer than \(HTTP2PushClient.maximumBody) bytes"), &actions)
                break
            }
            streams[frame.streamID] = nil  // no copy of the body while it grows
            if stream.body == nil { stream.body = bytes } else { stream.body!.writeBuffer(&bytes) }
            streams[frame.streamID] = stream
            if data.endStream { finish(frame.streamID, &actions) }
        case .rstStream(let code):
            // A stream answered completely has already finished; one reset before its end has no answer
            // (REFUSED_STREAM: not processed at all, so another connection may take it at once).
            fail(frame.streamID, Failure("the server reset the stream (\(code))", unsent: code == .refusedStream), &actions)
        case .goAway(_, let code, _) where code != .noError:
            // A connection error: the server answers nothing more on this connection and must close it (RFC 9113
            // §5.4.1), which it may not do. The requests still open fail now (they may have been processed) and
            // go elsewhere, rather than waiting out their deadlines on a connection that is dead.
            failAll(Failure("the server ended the connection with an error (GOAWAY \(code))"), &actions)
            actions.close = true
        case .goAway(let lastStreamID, let code, _):
            drain(&actions)
            for (id, stream) in streams {
                if !stream.onWire {
                    // Still queued for the server's stream limit: it must not open a stream after GOAWAY (a connection
                    // error), so it is reset while queued, which drops it without a byte sent, and goes elsewhere.
                    // (Queued streams are above any GOAWAY's last stream but the first of a graceful shutdown's two,
                    // whose last stream is 2^31-1.)
                    reset(id, Failure("the server is closing the connection (GOAWAY \(code))", unsent: true), &actions)
                } else if id > lastStreamID {
                    fail(id, Failure("the server is closing the connection (GOAWAY \(code)) before this request", unsent: true), &actions)
                }
            }
            closeIfDone(&actions)
        default:
            break
        }
        return actions
    }

    /// swift-nio-http2 counted the connection's receive window down to `inbound` (received bytes count whether or
    /// not they reach the handler: a reset stream's too); below half, it is topped up.
    mutating func windowShrank(to inbound: Int) -> Actions {
        var actions = Actions()
        if inbound < Self.connectionWindow / 2, case .steady = window {
            window = .toppingUp
            actions.windowUpdate = Self.connectionWindow - inbound
        }
        return actions
    }

    /// The top-up has left (or failed to).
    mutating func windowToppedUp() {
        window = .steady
    }

    /// A stream swift-nio-http2 closed itself (a malformed answer), or a stream error: no answer will come.
    mutating func streamEnded(_ id: HTTP2StreamID, _ failure: Failure) -> Actions {
        var actions = Actions()
        fail(id, failure, &actions)
        return actions
    }

    /// An error on the connection. An HTTP/2 error without a GOAWAY of swift-nio-http2's own concerns one received
    /// answer: the library resets that stream, and the reset, once flushed, closes the stream and fails its
    /// request alone. A connection error (GOAWAY written) or any other (TLS, I/O) ends the connection, which
    /// swift-nio-http2 leaves to us to close.
    mutating func connectionError(_ error: any Error) -> Actions {
        var actions = Actions()
        if error is any NIOHTTP2Error, !wentAway {
            actions.flush = true
            return actions
        }
        failAll(Failure("connection failed: \(error)"), &actions)
        actions.close = true
        return actions
    }

    /// The connection cannot serve: it closed, or it offers no HTTP/2 (`close`: close it).
    mutating func failed(_ failure: Failure, close: Bool) -> Actions {
        var actions = Actions()
        failAll(failure, &actions)
        actions.close = close
        return actions
    }

    /// The sweep, every 250 ms: requests past their deadline are reset and failed (and a connection that read
    /// nothing since such a request was written takes no more: it may be dead without knowing, behind a NAT that
    /// forgot it); a connection idle for a minute is closed.
    mutating func sweep(now: NIODeadline) -> Actions {
        var actions = Actions()
        for (id, stream) in streams where stream.deadline <= now {
            if lastRead < stream.written { drain(&actions) }
            reset(id, Failure("no answer before the request's deadline"), &actions)
        }
        idleSince = streams.isEmpty ? (idleSince ?? now) : nil
        if let idleSince, now - idleSince >= Self.idleLimit {
            drain(&actions)
            closeIfDone(&actions)
        }
        return actions
    }

    // MARK: Transitions

    private mutating func drain(_ actions: inout Actions) {
        if case .open = intake { intake = .draining }
        actions.retire = true
    }

    private mutating func finish(_ id: HTTP2StreamID, _ actions: inout Actions) {
        guard let stream = remove(id) else { return }
        if let status = stream.status {
            actions.completions.append((stream.promise, .success(.init(status: status, headers: stream.headers, body: stream.body ?? ByteBuffer()))))
        } else {
            actions.completions.append((stream.promise, .failure(Failure("the stream ended without an answer"))))
        }
        closeIfDone(&actions)
    }

    private mutating func fail(_ id: HTTP2StreamID, _ error: any Error, _ actions: inout Actions) {
        if let stream = remove(id) { actions.completions.append((stream.promise, .failure(error))) }
        closeIfDone(&actions)
    }

    /// Fails the request of a stream still open and resets the stream (failed first: the reset closes the stream
    /// at once, and its closing must not fail the request with another reason).
    private mutating func reset(_ id: HTTP2StreamID, _ error: any Error, _ actions: inout Actions) {
        guard let stream = remove(id) else { return }
        actions.completions.append((stream.promise, .failure(error)))
        actions.resets.append(id)
        closeIfDone(&actions)
    }

    private mutating func failAll(_ failure: Failure, _ actions: inout Actions) {
        if case .failed = intake {} else { intake = .failed(failure) }
        actions.retire = true
        for id in Array(streams.keys) {
            if let stream = remove(id) { actions.completions.append((stream.promise, .failure(failure))) }
        }
    }

    private mutating func remove(_ id: HTTP2StreamID) -> Stream? {
        guard let stream = streams.removeValue(forKey: id) else { return nil }
        byToken[stream.token] = nil
        return stream
    }

    /// A connection that takes no new request closes once its last stream is done.
    private func closeIfDone(_ actions: inout Actions) {
        if !takesRequests, streams.isEmpty { actions.close = true }
    }
}

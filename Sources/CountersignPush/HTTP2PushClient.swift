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

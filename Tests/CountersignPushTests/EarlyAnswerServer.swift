import Crypto
import Foundation
import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOPosix
import NIOSSL
import SwiftASN1
import Synchronization
import X509

/// An HTTP/2 server over TLS on 127.0.0.1 that answers every request with a
/// complete 200 before reading its body, then resets the stream with
/// `RST_STREAM(NO_ERROR)`, as RFC 9113 §8.1 allows (nginx's `return 200` does
/// this). It answers Google's token endpoint and FCM's `messages:send` alike,
/// and counts the GOAWAY frames the client sends it, the connections it
/// accepts and the most streams open at once on one of them.
final class EarlyAnswerServer: Sendable {
    /// The self-signed certificate's PEM, for the client's trust roots.
    let certificatePEM: String
    private let tls: TLSConfiguration
    private let counts = Counts()
    /// The connections accepted and not yet closed by ``closeConnections(_:)``.
    private let accepted = Accepted()
    private let maxConcurrentStreams: Int
    private let answerDelay: TimeAmount
    private let padding: Int

    final class Counts: Sendable {
        private let state = Mutex((resets: 0, goAways: 0, connections: 0, mostStreams: 0))
        var resets: Int { state.withLock { $0.resets } }
        var goAways: Int { state.withLock { $0.goAways } }
        var connections: Int { state.withLock { $0.connections } }
        var mostStreams: Int { state.withLock { $0.mostStreams } }
        func reset() { state.withLock { $0.resets += 1 } }
        func goAway() { state.withLock { $0.goAways += 1 } }
        func connection() { state.withLock { $0.connections += 1 } }
        func streams(_ open: Int) { state.withLock { $0.mostStreams = max($0.mostStreams, open) } }
    }

    final class Accepted: Sendable {
        private let channels = Mutex<[any Channel]>([])
        func add(_ channel: any Channel) { channels.withLock { $0.append(channel) } }
        func takeAll() -> [any Channel] {
            channels.withLock { channels in
                defer { channels = [] }
                return channels
            }
        }
    }

    /// The streams open on one connection.
    final class OpenStreams: Sendable {
        private let open = Mutex(0)
        func change(by delta: Int) -> Int {
            open.withLock {
                $0 += delta
                return $0
            }
        }
    }

    var resets: Int { counts.resets }
    /// GOAWAY frames received from the client (swift-nio-http2 sends
    /// `ENHANCE_YOUR_CALM` when it judges the resets an attack).
    var goAways: Int { counts.goAways }
    var connections: Int { counts.connections }
    /// The most streams open at once on one connection.
    var mostStreamsAtOnce: Int { counts.mostStreams }

    /// Advertises `maxConcurrentStreams` and answers each request `answerDelay` after its headers, its JSON
    /// answer lengthened by `padding` spaces.
    init(maxConcurrentStreams: Int = 100, answerDelay: TimeAmount = .zero, padding: Int = 0) throws {
        self.maxConcurrentStreams = maxConcurrentStreams
        self.answerDelay = answerDelay
        self.padding = padding
        let certificate = try TestCertificate()
        certificatePEM = certificate.certificatePEM
        var tls = try certificate.serverConfiguration()
        tls.applicationProtocols = ["h2"]
        self.tls = tls
    }

    /// Serves on a free port while `body` runs with `https://127.0.0.1:PORT`.
    func serve<T: Sendable>(_ body: (String) async throws -> T) async throws -> T {
        let context = try NIOSSLContext(configuration: tls)
        let counts = self.counts
        let accepted = self.accepted
        let delay = answerDelay
        let padding = padding
        var connectionConfiguration = NIOHTTP2Handler.ConnectionConfiguration()
        // So that `/bad-length` can leave as written: the client must catch it.
        connectionConfiguration.contentLengthValidation = .disabled
        connectionConfiguration.initialSettings = [
            HTTP2Setting(parameter: .maxConcurrentStreams, value: maxConcurrentStreams),
            HTTP2Setting(parameter: .maxHeaderListSize, value: HPACKDecoder.defaultMaxHeaderListSize),
        ]
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { [connectionConfiguration] channel in
                counts.connection()
                accepted.add(channel)
                let open = OpenStreams()
                return channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    try sync.addHandler(NIOSSLServerHandler(context: context))
                    _ = try sync.configureHTTP2Pipeline(
                        mode: .server, connectionConfiguration: connectionConfiguration, streamConfiguration: .init()
                    ) { stream in
                        counts.streams(open.change(by: 1))
                        stream.closeFuture.whenComplete { _ in _ = open.change(by: -1) }
                        return stream.eventLoop.makeCompletedFuture {
                            try stream.pipeline.syncOperations.addHandler(EarlyAnswer(counts: counts, delay: delay, padding: padding))
                        }
                    }
                    try sync.addHandler(GoAwayCounter(counts: counts))
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        let result: Result<T, any Error>
        do {
            result = .success(try await body("https://127.0.0.1:\(channel.localAddress?.port ?? 0)"))
        } catch {
            result = .failure(error)
        }
        try? await channel.close()
        return try result.get()
    }

    /// How the server ends a connection it no longer wants, as FCM's front ends do with one left idle.
    enum Closing: String, CaseIterable, Sendable {
        /// GOAWAY(NO_ERROR), then TLS's close_notify and a FIN.
        case goAway
        /// A TCP reset (SO_LINGER 0), with no word at the TLS or HTTP/2 level.
        case reset
    }

    /// Ends every connection accepted so far, `how` says how; returns once they are closed on this side.
    func closeConnections(_ how: Closing) async throws {
        for channel in accepted.takeAll() {
            switch how {
            case .goAway:
                let goAway = HTTP2Frame(streamID: .rootStream, payload: .goAway(lastStreamID: .maxID, errorCode: .noError, opaqueData: nil))
                try await channel.writeAndFlush(goAway)
            case .reset:
                guard let socket = channel as? any SocketOptionProvider else { throw ChannelError.operationUnsupported }
                try await socket.setSoLinger(linger(l_onoff: 1, l_linger: 0)).get()
            }
            do {
                try await channel.close()
            } catch ChannelError.alreadyClosed {
                // After a GOAWAY the client, with nothing open on the connection, may close it first.
            }
        }
    }

    /// One stream: the answer goes out on the request's HEADERS, the body is never read.
    private final class EarlyAnswer: ChannelInboundHandler {
        typealias InboundIn = HTTP2Frame.FramePayload
        typealias OutboundOut = HTTP2Frame.FramePayload
        let counts: Counts
        let delay: TimeAmount
        let padding: Int
        var answered = false

        init(counts: Counts, delay: TimeAmount, padding: Int) {
            self.counts = counts
            self.delay = delay
            self.padding = padding
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            guard case .headers(let request) = unwrapInboundIn(data), !answered else { return }
            answered = true
            // `/goaway` ends the connection as a server does on a connection error, without closing it or answering.
            if request.headers.first(name: ":path") == "/goaway" {
                let goAway = HTTP2Frame(streamID: .rootStream, payload: .goAway(lastStreamID: .maxID, errorCode: .protocolError, opaqueData: nil))
                context.channel.parent?.writeAndFlush(goAway, promise: nil)
                return
            }
            // `/bad-length` is answered at once, with a content-length its body does not have.
            let bad = request.headers.first(name: ":path") == "/bad-length"
            guard delay > .zero, !bad else { return answer(request, context: context) }
            let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
            context.eventLoop.scheduleTask(in: delay) {
                let (handler, context) = loopBound.value
                handler.answer(request, context: context)
            }
        }

        private func answer(_ request: HTTP2Frame.FramePayload.Headers, context: ChannelHandlerContext) {
            let json =
                request.headers.first(name: ":path") == "/token"
                ? #"{"access_token":"ya29.early","expires_in":3599,"token_type":"Bearer"}"#
                : #"{"name":"projects/countersign-test/messages/0:1"}"#
            let body = context.channel.allocator.buffer(string: json + String(repeating: " ", count: padding))
            let declared = body.readableBytes + (request.headers.first(name: ":path") == "/bad-length" ? 10 : 0)
            let head: HPACKHeaders = [":status": "200", "content-type": "application/json", "content-length": "\(declared)"]
            context.write(wrapOutboundOut(.headers(.init(headers: head))), promise: nil)
            let sent = context.eventLoop.makePromise(of: Void.self)
            context.writeAndFlush(wrapOutboundOut(.data(.init(data: .byteBuffer(body), endStream: true))), promise: sent)
            guard let streamID = try? context.channel.syncOptions?.getOption(HTTP2StreamChannelOptions.streamID),
                let connection = context.channel.parent
            else { return }
            let counts = self.counts
            // After the answer has left: the reset a client must not take as a failure.
            sent.futureResult.whenSuccess {
                counts.reset()
                connection.writeAndFlush(HTTP2Frame(streamID: streamID, payload: .rstStream(.noError)), promise: nil)
            }
        }
    }

    /// Frames of the connection itself reach the parent pipeline.
    private final class GoAwayCounter: ChannelInboundHandler {
        typealias InboundIn = HTTP2Frame
        let counts: Counts

        init(counts: Counts) { self.counts = counts }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            if case .goAway = unwrapInboundIn(data).payload { counts.goAway() }
            context.fireChannelRead(data)
        }
    }
}

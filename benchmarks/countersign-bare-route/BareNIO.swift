// The floor under the bare route: SwiftNIO's HTTP/1 server pipeline and one
// handler, no framework, no task per request. A request to `/held` is kept
// (its channel, on its event loop) until `POST /release` answers them all; any
// other request is answered "ok" at once. What a waiting request costs here is
// what an open HTTP/1 connection with a parsed request costs in SwiftNIO.
import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization

/// Every held request's channel, answered by `POST /release`.
final class HeldChannels: Sendable {
    private let held = Mutex<[any Channel]>([])

    func hold(_ channel: any Channel) { held.withLock { $0.append(channel) } }

    func releaseAll() -> Int {
        let released = held.withLock { held in
            defer { held = [] }
            return held
        }
        for channel in released {
            channel.eventLoop.execute { BareNIOHandler.answer(channel, "ok") }
        }
        return released.count
    }
}

final class BareNIOHandler: ChannelInboundHandler, Sendable {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    let held: HeldChannels

    init(held: HeldChannels) { self.held = held }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard case .head(let head) = unwrapInboundIn(data) else { return }
        if head.uri.hasPrefix("/held") {
            held.hold(context.channel)
        } else if head.method == .POST && head.uri == "/release" {
            Self.answer(context.channel, "\(held.releaseAll())")
        } else {
            Self.answer(context.channel, "ok")
        }
    }

    /// A complete answer with `text`, on the channel's event loop.
    static func answer(_ channel: any Channel, _ text: String) {
        var headers = HTTPHeaders()
        headers.add(name: "content-length", value: "\(text.utf8.count)")
        headers.add(name: "content-type", value: "text/plain; charset=utf-8")
        channel.write(HTTPServerResponsePart.head(HTTPResponseHead(version: .http1_1, status: .ok, headers: headers)), promise: nil)
        channel.write(HTTPServerResponsePart.body(.byteBuffer(channel.allocator.buffer(string: text))), promise: nil)
        channel.writeAndFlush(HTTPServerResponsePart.end(nil), promise: nil)
    }
}

/// Serves the floor on 127.0.0.1:`port` until killed.
func runBareNIO(port: Int) async throws {
    let held = HeldChannels()
    let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
        .serverChannelOption(.backlog, value: 4096)
        .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
        .childChannelInitializer { channel in
            channel.pipeline.configureHTTPServerPipeline().flatMap { channel.pipeline.addHandler(BareNIOHandler(held: held)) }
        }
        .bind(host: "127.0.0.1", port: port)
        .get()
    try await channel.closeFuture.get()
}

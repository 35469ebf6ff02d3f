import NIOCore
import NIOEmbedded
import NIOHPACK
import NIOHTTP2
import Testing

@testable import CountersignPush

/// The push client's connection pipeline above TLS (``HTTP2PushClient/addFrameHandlers(to:streamBudget:)``), on an
/// embedded channel: what leaves it, and in how many flushes.
@Suite struct FlushPerTurnTests {
    /// Counts the flushes that pass it on their way to the socket.
    final class FlushCounter: ChannelOutboundHandler {
        typealias OutboundIn = ByteBuffer
        var flushes = 0
        func flush(context: ChannelHandlerContext) {
            flushes += 1
            context.flush()
        }
    }

    /// Records the HEADERS and DATA frames a server reads, in order.
    final class FrameRecorder: ChannelInboundHandler {
        typealias InboundIn = HTTP2Frame
        var frames: [String] = []
        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let frame = unwrapInboundIn(data)
            switch frame.payload {
            case .headers: frames.append("HEADERS \(Int(frame.streamID))")
            case .data: frames.append("DATA \(Int(frame.streamID))")
            default: break
            }
        }
    }

    @Test func requestsOfOneTurnLeaveInOneFlushEachWithItsFramesTogether() throws {
        let client = EmbeddedChannel()
        let counter = FlushCounter()
        try client.pipeline.syncOperations.addHandler(counter)
        let handler = try HTTP2PushClient.addFrameHandlers(to: client.pipeline.syncOperations, streamBudget: 100)
        try client.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 443)).wait()
        client.embeddedEventLoop.run()
        var sent = ByteBuffer()
        func drain() throws {
            while var bytes = try client.readOutbound(as: ByteBuffer.self) { sent.writeBuffer(&bytes) }
        }
        try drain()
        let before = counter.flushes

        var promises: [EventLoopPromise<HTTP2PushClient.Response>] = []
        for token in UInt64(1)...3 {
            let head: HPACKHeaders = [":method": "POST", ":scheme": "https", ":authority": "fcm.test", ":path": "/send", "content-length": "2"]
            let promise = client.eventLoop.makePromise(of: HTTP2PushClient.Response.self)
            handler.send(head, body: ByteBuffer(string: "{}"), deadline: .now() + .seconds(60), token: token, promise: promise)
            promises.append(promise)
        }
        // Nothing has left within the turn: the three requests wait for its end.
        #expect(counter.flushes == before)
        #expect(try client.readOutbound(as: ByteBuffer.self) == nil)
        client.embeddedEventLoop.run()
        #expect(counter.flushes == before + 1)
        try drain()

        // Read by a server: each request's DATA right after its HEADERS.
        let server = EmbeddedChannel()
        let recorder = FrameRecorder()
        try server.pipeline.syncOperations.addHandler(NIOHTTP2Handler(mode: .server))
        try server.pipeline.syncOperations.addHandler(recorder)
        try server.writeInbound(sent)
        #expect(recorder.frames == ["HEADERS 1", "DATA 1", "HEADERS 3", "DATA 3", "HEADERS 5", "DATA 5"])

        _ = try? server.finish()
        _ = try? client.finish()
        for promise in promises { promise.fail(CancellationError()) }
    }

    /// A close asked for in the turn that wrote frames sends them first: they are not dropped with the held flush.
    @Test func aCloseInTheTurnOfAWriteSendsItFirst() throws {
        let client = EmbeddedChannel()
        let handler = try HTTP2PushClient.addFrameHandlers(to: client.pipeline.syncOperations, streamBudget: 100)
        try client.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 443)).wait()
        client.embeddedEventLoop.run()
        var sent = ByteBuffer()
        while var bytes = try client.readOutbound(as: ByteBuffer.self) { sent.writeBuffer(&bytes) }

        let head: HPACKHeaders = [":method": "POST", ":scheme": "https", ":authority": "fcm.test", ":path": "/send", "content-length": "2"]
        let promise = client.eventLoop.makePromise(of: HTTP2PushClient.Response.self)
        handler.send(head, body: ByteBuffer(string: "{}"), deadline: .now() + .seconds(60), token: 1, promise: promise)
        client.close(promise: nil)
        while var bytes = try client.readOutbound(as: ByteBuffer.self) { sent.writeBuffer(&bytes) }

        let server = EmbeddedChannel()
        let recorder = FrameRecorder()
        try server.pipeline.syncOperations.addHandler(NIOHTTP2Handler(mode: .server))
        try server.pipeline.syncOperations.addHandler(recorder)
        try server.writeInbound(sent)
        #expect(recorder.frames == ["HEADERS 1", "DATA 1"])
        _ = try? server.finish()
        client.embeddedEventLoop.run()
        promise.fail(CancellationError())
    }
}

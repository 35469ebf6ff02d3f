import HTTPTypes
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import NIOHTTPTypes

/// HTTP/1.1 with the contract's connection limits: a connection with no
/// request in flight for `idleTimeout` is closed (Hummingbird's own idle
/// handler), and a request that has not fully arrived (head and body)
/// `requestTimeout` after its first byte is closed too, so a client trickling
/// headers or a body (slowloris) cannot hold a connection.
///
/// A long poll that must wait is parked on its connection (see
/// `LongPollHandOff.swift`).
struct GuardedHTTP1Channel: HTTPChannelHandler {
    struct Value: ServerChildChannelValue {
        let http: HTTP1Channel.Value
        let hangUp: HangUpWatcher
        var channel: any Channel { http.channel }
    }
    var responder: HTTPChannelHandler.Responder
    let idleTimeout: TimeAmount
    let requestTimeout: TimeAmount
    let connections: ConnectionsPerAddress

    static func builder(idleTimeout: Duration, requestTimeout: Duration, connections: ConnectionsPerAddress) -> HTTPServerBuilder {
        HTTPServerBuilder { responder in
            GuardedHTTP1Channel(
                responder: responder, idleTimeout: TimeAmount(idleTimeout), requestTimeout: TimeAmount(requestTimeout), connections: connections)
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
        let deadline = RequestDeadline()
        let http1 = HTTP1Channel(
            responder: responder,
            configuration: .init(additionalChannelHandlers: [RequestWatcher(deadline: deadline, timeout: requestTimeout)], idleTimeout: idleTimeout))
        let requestTimeout = requestTimeout
        return http1.setup(channel: channel, logger: logger).flatMapThrowing { value in
            let pipeline = channel.pipeline.syncOperations
            // A connection keeps its read buffer while it waits (NIO pools it); the
            // default starts at 2 KiB, where a request head is a few hundred bytes.
            // The buffer still grows, read by read, for larger requests.
            try channel.syncOptions?.setOption(ChannelOptions.recvAllocator, value: Self.readBuffers)
            // First in the pipeline: it sees the raw bytes, before the HTTP decoder.
            try pipeline.addHandler(ByteWatcher(deadline: deadline, timeout: requestTimeout), position: .first)
            let hangUp = HangUpWatcher()
            try pipeline.addHandler(hangUp, position: .first)
            // Between the connection's writer and the state handler, which so
            // never sees the dropped answer of a parked long poll.
            try pipeline.addHandler(ParkedAnswerFilter(), position: .after(try pipeline.handler(type: HTTPConnectionStateHandler.self)))
            return Value(http: value, hangUp: hangUp)
        }
    }

    static let readBuffers = AdaptiveRecvByteBufferAllocator(minimum: 64, initial: 512, maximum: 65536)

    func handle(value: Value, logger: Logger) async {
        // Hummingbird's own loop, with a responder that parks long polls: it
        // writes their answers after the wait through the connection's writer,
        // lent by this outer scope (Hummingbird's loop opens the same scope again).
        try? await value.http.executeThenClose { _, outbound in
            var connection = self
            connection.responder = LongPollResponder(responder: responder, outbound: outbound, hangUp: value.hangUp).respond
            await connection.handleHTTP(asyncChannel: value.http, logger: logger)
        }
    }
}

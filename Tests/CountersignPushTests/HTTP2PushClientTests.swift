import CountersignPush
import Foundation
import NIOCore
import NIOPosix
import NIOSSL
import TestSupport
import Testing

/// What the FCM client on swift-nio-http2 does when no answer comes; its
/// answers themselves are checked by the FCM sender's tests run over it
/// (`FCMSenderTests`, `EarlyAnswerTests` with `frames`).
@Suite struct HTTP2PushClientTests {
    static let headers = [("content-type", "application/json")]

    /// A server that answers only after 30 s.
    static func withSlowServer(_ body: (HTTP2PushClient, EarlyAnswerServer) async throws -> Void) async throws {
        let server = try EarlyAnswerServer(answerDelay: .seconds(30))
        try await EarlyAnswerTests.serve(server) { base, caFile, _ in
            let client = try HTTP2PushClient(endpoint: base, caFile: caFile, connections: 1, connectTimeout: hangDetector)
            do {
                try await body(client, server)
            } catch {
                await client.shutdown()
                throw error
            }
            await client.shutdown()
        }
    }

    @Test(.timeLimit(.minutes(5))) func aRequestWithoutAnAnswerFailsAtItsDeadline() async throws {
        try await Self.withSlowServer { client, _ in
            let failure = await #expect(throws: HTTP2PushClient.Failure.self) {
                try await client.post(path: "/slow", headers: Self.headers, body: ByteBuffer(string: "{}"), timeout: .milliseconds(300))
            }
            #expect(failure?.description.contains("deadline") == true, "\(String(describing: failure))")
        }
    }

    @Test(.timeLimit(.minutes(5))) func aCancelledRequestEndsAtOnce() async throws {
        try await Self.withSlowServer { client, _ in
            let waiting = Task {
                try await client.post(path: "/slow", headers: Self.headers, body: ByteBuffer(string: "{}"), timeout: .seconds(60))
            }
            // Cancelled while waiting for its answer (or, on a slow machine, before it was sent: the same ending).
            try await Task.sleep(for: .milliseconds(200))
            waiting.cancel()
            await #expect(throws: CancellationError.self) { try await waiting.value }
        }
    }

    /// A connection that read nothing since a request was written, until that request's deadline, may be dead
    /// without knowing (a NAT that forgot it): it takes no more requests, and the next one opens another.
    @Test(.timeLimit(.minutes(5))) func aSilentConnectionIsRetired() async throws {
        try await Self.withSlowServer { client, server in
            func unanswered() async {
                await #expect(throws: HTTP2PushClient.Failure.self) {
                    try await client.post(path: "/slow", headers: Self.headers, body: ByteBuffer(string: "{}"), timeout: .milliseconds(300))
                }
            }
            // The first request may go out before the server's settings arrive (a sign of life read after it);
            // by the second at the latest, nothing at all is read after the request.
            await unanswered()
            if client.openConnections == 1 { await unanswered() }
            #expect(client.openConnections == 0)
            let before = server.connections
            await unanswered()
            // Its 300 ms deadline may pass before the server has accepted the new connection on a loaded
            // machine: wait for it (the time limit catches a client that never opens one).
            while server.connections < before + 1 { try await Task.sleep(for: .milliseconds(20)) }
            #expect(server.connections == before + 1)
        }
    }

    /// A server that ends the connection with an error (GOAWAY with an error code) answers nothing more on it,
    /// even when it leaves it open: the requests open on it fail at once (their hour-long deadline is not waited
    /// out; the test's time limit catches that), and the next request opens another connection.
    @Test(.timeLimit(.minutes(5))) func aConnectionErrorFailsTheOpenRequestsAtOnce() async throws {
        try await Self.withSlowServer { client, server in
            let waiting = Task {
                try await client.post(path: "/slow", headers: Self.headers, body: ByteBuffer(string: "{}"), timeout: .seconds(3600))
            }
            // The first request's stream is open on the server before the GOAWAY is asked for.
            while server.mostStreamsAtOnce == 0 { try await Task.sleep(for: .milliseconds(20)) }
            let failure = await #expect(throws: HTTP2PushClient.Failure.self) {
                try await client.post(path: "/goaway", headers: Self.headers, body: ByteBuffer(string: "{}"), timeout: .seconds(3600))
            }
            #expect(failure?.description.contains("GOAWAY") == true, "\(String(describing: failure))")
            await #expect(throws: HTTP2PushClient.Failure.self) { try await waiting.value }
            #expect(client.openConnections == 0)
            await #expect(throws: HTTP2PushClient.Failure.self) {
                try await client.post(path: "/slow", headers: Self.headers, body: ByteBuffer(string: "{}"), timeout: .milliseconds(300))
            }
            // On a loaded machine that request's deadline may pass before the server has accepted the new
            // connection: wait for it (the time limit catches a client that never opens one).
            while server.connections < 2 { try await Task.sleep(for: .milliseconds(20)) }
            #expect(server.connections == 2)
        }
    }

    /// A connection the server ends while it is idle (FCM closes one left unused for minutes), politely or with
    /// a TCP reset, is not used again: the next request opens another and is answered.
    @Test(.timeLimit(.minutes(5)), arguments: EarlyAnswerServer.Closing.allCases)
    func anIdleConnectionTheServerEndsIsReplaced(closing: EarlyAnswerServer.Closing) async throws {
        let server = try EarlyAnswerServer()
        try await EarlyAnswerTests.serve(server) { base, caFile, _ in
            let client = try HTTP2PushClient(endpoint: base, caFile: caFile, connections: 1, connectTimeout: hangDetector)
            func post() async throws -> Int {
                try await client.post(path: "/ok", headers: Self.headers, body: ByteBuffer(string: "{}"), timeout: .seconds(30)).status
            }
            do {
                #expect(try await post() == 200)
                #expect(client.openConnections == 1)
                try await server.closeConnections(closing)
                // The client learns of the close from its connection's events: wait for them (the time limit
                // catches a client that never does, and would send on a dead connection).
                while client.openConnections == 1 { try await Task.sleep(for: .milliseconds(20)) }
                #expect(try await post() == 200)
                #expect(server.connections == 2)
                #expect(client.openConnections == 1)
            } catch {
                await client.shutdown()
                throw error
            }
            await client.shutdown()
        }
    }

    /// An answer that breaks HTTP/2 on its own stream (a content-length its body does not have) fails that
    /// request alone: the requests in flight beside it on the same connection are answered.
    @Test(.timeLimit(.minutes(5))) func aMalformedAnswerFailsItsRequestOnly() async throws {
        let server = try EarlyAnswerServer(answerDelay: .milliseconds(500))
        try await EarlyAnswerTests.serve(server) { base, caFile, _ in
            let client = try HTTP2PushClient(endpoint: base, caFile: caFile, connections: 1, connectTimeout: hangDetector)
            let others = (0..<8).map { _ in
                Task { try await client.post(path: "/ok", headers: Self.headers, body: ByteBuffer(string: "{}"), timeout: .seconds(30)).status }
            }
            await #expect(throws: HTTP2PushClient.Failure.self) {
                try await client.post(path: "/bad-length", headers: Self.headers, body: ByteBuffer(string: "{}"), timeout: .seconds(30))
            }
            for other in others { #expect(try await other.value == 200) }
            #expect(server.connections == 1)
            await client.shutdown()
        }
    }

    /// Answers far beyond HTTP/2's initial window, and beyond the window the client opens at the start, all
    /// arrive: the client gives the connection's window back as the answers are read.
    /// The limit is a hang detector: under stress-ng beside the whole suite it once took 164 s.
    @Test(.timeLimit(.minutes(6))) func answersBeyondTheConnectionWindowKeepFlowing() async throws {
        let server = try EarlyAnswerServer(padding: 16 * 1024)
        try await EarlyAnswerTests.serve(server) { base, caFile, _ in
            let client = try HTTP2PushClient(endpoint: base, caFile: caFile, connections: 1, connectTimeout: hangDetector)
            let total = 1200  // about 20 MB of answers on one connection
            let answered = try await withThrowingTaskGroup(of: Int.self) { group in
                var answered = 0
                for index in 0..<total {
                    if index >= 32, let status = try await group.next() { answered += status == 200 ? 1 : 0 }
                    group.addTask {
                        try await client.post(path: "/big", headers: Self.headers, body: ByteBuffer(string: "{}"), timeout: .seconds(60)).status
                    }
                }
                for try await status in group { answered += status == 200 ? 1 : 0 }
                return answered
            }
            #expect(answered == total)
            #expect(server.connections == 1)
            await client.shutdown()
        }
    }

    @Test(.timeLimit(.minutes(5))) func shuttingDownFailsTheRequestsInFlight() async throws {
        try await Self.withSlowServer { client, _ in
            let waiting = Task {
                try await client.post(path: "/slow", headers: Self.headers, body: ByteBuffer(string: "{}"), timeout: .seconds(60))
            }
            while client.openConnections == 0 { try await Task.sleep(for: .milliseconds(20)) }
            try await Task.sleep(for: .milliseconds(100))
            await client.shutdown()
            await #expect(throws: HTTP2PushClient.Failure.self) { try await waiting.value }
            await #expect(throws: HTTP2PushClient.Failure.self) {
                try await client.post(path: "/slow", headers: Self.headers, body: ByteBuffer(), timeout: .seconds(1))
            }
        }
    }

    @Test func onlyAnHTTPSAddressIsTaken() {
        #expect(throws: HTTP2PushClient.Failure.self) { try HTTP2PushClient(endpoint: "http://127.0.0.1:8080", caFile: nil) }
        #expect(throws: HTTP2PushClient.Failure.self) { try HTTP2PushClient(endpoint: "fcm.googleapis.com", caFile: nil) }
    }

    /// A server that offers only HTTP/1.1 is refused by name, not misread.
    @Test(.timeLimit(.minutes(5))) func aServerWithoutHTTP2IsNamed() async throws {
        let folder = try makeTemporaryFolder("http1-only")
        defer { try? FileManager.default.removeItem(at: folder) }
        let certificate = try TestCertificate()
        let caFile = try certificate.caFile(in: folder)
        var tls = try certificate.serverConfiguration()
        tls.applicationProtocols = ["http/1.1"]
        try await HTTP1OnlyServer.serve(tls: tls) { base in
            let client = try HTTP2PushClient(endpoint: base, caFile: caFile, connectTimeout: hangDetector)
            let failure = await #expect(throws: HTTP2PushClient.Failure.self) {
                try await client.post(path: "/", headers: Self.headers, body: ByteBuffer(string: "{}"), timeout: .seconds(30))
            }
            #expect(failure?.description.contains("HTTP/2") == true, "\(String(describing: failure))")
            await client.shutdown()
        }
    }
}

/// A TLS server that offers only `http/1.1` in ALPN and reads nothing: enough
/// for a client to learn in the handshake that HTTP/2 is not spoken.
enum HTTP1OnlyServer {
    static func serve(tls: TLSConfiguration, _ body: (String) async throws -> Void) async throws {
        let context = try NIOSSLContext(configuration: tls)
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: context)) }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        let result: Result<Void, any Error>
        do {
            result = .success(try await body("https://127.0.0.1:\(channel.localAddress?.port ?? 0)"))
        } catch {
            result = .failure(error)
        }
        try? await channel.close()
        try result.get()
    }
}

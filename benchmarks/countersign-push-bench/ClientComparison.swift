import ArgumentParser
import AsyncHTTPClient
import CountersignPush
import Foundation
import NIOCore
import NIOHTTP1

/// The same FCM sends, through AsyncHTTPClient (configured as `PushSetup`
/// configures it, the daemon's client for APNs, Web Push and the token
/// exchange) and through ``HTTP2PushClient`` (the daemon's FCM client), to
/// one server (the nginx stub of the benchmarks), alternating, with the same
/// connections and streams in flight: what the HTTP/2 client alone costs per
/// push, without the daemon around it. A measurement, not a test.
struct ClientComparison: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "clients", abstract: "Compare AsyncHTTPClient with HTTP2PushClient on the same sends.")

    @Option(help: "The server, as https://HOST:PORT.") var url = "https://127.0.0.1:18443"
    @Option(help: "CA that signed the server's certificate (PEM).") var ca: String
    @Option(help: "Sends per client per round.") var messages = 30000
    @Option(help: "HTTP/2 connections per client.") var connections = 2
    @Option(help: "Streams in flight per connection.") var streams = 32
    @Option(help: "Rounds, alternating the two clients.") var rounds = 3
    @Option(help: "The request body, from a file (default: a prompt of the size the daemon sends).") var body: String?

    static let path = "/v1/projects/bench/messages:send"

    /// A prompt of the size the daemon sends.
    static let prompt: ByteBuffer = {
        let token = "bench-token-0-0-" + String(repeating: "x", count: 120)
        let text = """
            {"message":{"token":"\(token)","data":{"type":"approval_request","requestId":"\(String(repeating: "r", count: 40))",\
            "action":"password_reset","expiresAt":"2026-01-01T00:00:00Z"},"android":{"priority":"HIGH","ttl":"60s"},\
            "apns":{"headers":{"apns-priority":"10","apns-expiration":"1767225600"},"payload":{"aps":{"alert":\
            {"title":"Approve password reset?","body":"Someone asked to reset the password of ana@example.com"},\
            "category":"APPROVAL_REQUEST"}}}}}
            """
        return ByteBuffer(string: text)
    }()

    func run() async throws {
        guard url.lowercased().hasPrefix("https://") else { throw ValidationError("--url must be https://HOST:PORT") }
        let payload =
            try body.map { path in
                guard let data = FileManager.default.contents(atPath: path) else { throw ValidationError("cannot read \(path)") }
                return ByteBuffer(bytes: data)
            } ?? Self.prompt
        print("body: \(payload.readableBytes) bytes; \(connections) connections × \(streams) streams; \(messages) sends per round")
        for round in 1...rounds {
            let ahc: Double
            do { ahc = try await measure(name: "AsyncHTTPClient") { try await sendThroughAHC(payload) } } catch {
                print("AsyncHTTPClient failed: \(error)")
                throw ExitCode.failure
            }
            let frames: Double
            do { frames = try await measure(name: "HTTP2PushClient") { try await sendThroughFrames(payload) } } catch {
                print("HTTP2PushClient failed: \(error)")
                throw ExitCode.failure
            }
            print(String(format: "round %d: AsyncHTTPClient %.0f/s, HTTP2PushClient %.0f/s (%.2f×)", round, ahc, frames, frames / ahc))
        }
    }

    func measure(name: String, _ body: () async throws -> Int) async throws -> Double {
        let clock = ContinuousClock()
        let started = clock.now
        let ok = try await body()
        let elapsed = clock.now - started
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        guard ok == messages else { throw ValidationError("\(name): \(ok) of \(messages) answered 200") }
        return Double(messages) / seconds
    }

    /// `messages` sends spread over `connections` clients, `streams` in flight on each; the count of 200s.
    func spread(_ send: @escaping @Sendable (_ connection: Int) async throws -> Int) async throws -> Int {
        try await withThrowingTaskGroup(of: Int.self) { group in
            let inFlight = connections * streams
            var ok = 0
            for index in 0..<messages {
                if index >= inFlight, let status = try await group.next() { ok += status == 200 ? 1 : 0 }
                let connection = index % connections
                group.addTask { try await send(connection) }
            }
            for try await status in group { ok += status == 200 ? 1 : 0 }
            return ok
        }
    }

    func sendThroughAHC(_ payload: ByteBuffer) async throws -> Int {
        let clients = try (0..<connections).map { _ in try PushSetup.makeClient(caFile: ca) }
        let target = url + Self.path
        let ok = try await spread { connection in
            var request = HTTPClientRequest(url: target)
            request.method = .POST
            request.headers.add(name: "Authorization", value: "Bearer ya29.stub-token")
            request.headers.add(name: "Content-Type", value: "application/json; charset=utf-8")
            request.body = .bytes(payload)
            let response = try await clients[connection].execute(request, timeout: .seconds(30))
            _ = try await response.body.collect(upTo: 1 << 16)
            return Int(response.status.code)
        }
        for client in clients { try await client.shutdown() }
        return ok
    }

    func sendThroughFrames(_ payload: ByteBuffer) async throws -> Int {
        let client = try HTTP2PushClient(endpoint: url, caFile: ca, connections: connections)
        let headers = [("authorization", "Bearer ya29.stub-token"), ("content-type", "application/json; charset=utf-8")]
        let ok = try await spread { _ in try await client.post(path: Self.path, headers: headers, body: payload, timeout: .seconds(30)).status }
        await client.shutdown()
        return ok
    }
}

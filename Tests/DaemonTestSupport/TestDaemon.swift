import AsyncHTTPClient
import CountersignCore
import CountersignHTTP
import CountersignRuntime
import CountersignStore
import Foundation
import HTTPTypes
import HummingbirdTesting
import Logging
import NIOCore
import NIOHTTP1
import ServiceRunner
import Synchronization
import TestSupport

/// Runs `body` against a test daemon on a fresh temporary folder (the common
/// case), with the test configuration changed by `configure`.
func withTestDaemon<T: Sendable>(
    _ transport: Transport = .router,
    configure: (inout ServeConfiguration) -> Void = { _ in },
    logs: LogCapture = LogCapture(),
    pushSender: (any PushSender)? = nil,
    clock: ManualClock? = nil,
    _ body: @Sendable (TestDaemon) async throws -> T
) async throws -> T {
    try await withTemporaryFolder { folder in
        try await TestDaemon.run(
            TestDaemon.configuration(folder, configure), transport: transport, logs: logs, pushSender: pushSender, clock: clock, body)
    }
}

/// How a test reaches its daemon.
enum Transport: Sendable {
    /// HTTP over a socket on 127.0.0.1, with every service `serve` runs: for
    /// what a connection carries (the peer's address as seen in answers and
    /// audit, `X-Forwarded-For`, the Host header, connection caps, deadlines,
    /// hang-ups, chunked bodies), for a long poll woken through the
    /// connection's hang-up watcher, and for clients other than `call`.
    case socket
    /// Straight into the router (HummingbirdTesting's `.router`): the same
    /// middleware and routes, and the application's services (not the broker's
    /// drain at shutdown or systemd); only `/metrics` listens. Every request's
    /// client address is then `unknown`, one address for all, and a long poll
    /// waits without a hang-up watcher.
    case router
}

/// A daemon clock a test moves by hand: request lifetimes, email codes and
/// rate-limit windows then end when the test says, not when a busy machine
/// gets round to it. Starts at the real time and only moves forward.
final class ManualClock: Sendable {
    private let current = Mutex(Date())

    init() {}

    var now: Date { current.withLock { $0 } }

    /// Moves the clock `seconds` forward.
    func advance(_ seconds: TimeInterval) {
        current.withLock { $0 = $0.addingTimeInterval(seconds) }
    }
}

/// A daemon built by `buildApplication` exactly as `serve` builds it, running on
/// 127.0.0.1 with an ephemeral port and talked to over real HTTP, or reached
/// through its router (``Transport``).
struct TestDaemon: Sendable {
    /// `http://127.0.0.1:PORT`; with the router transport an address nothing answers at.
    let base: String
    let server: CountersignServer
    let hasher: BcryptPasswordHasher
    /// The router's test client, with the router transport.
    var router: (any TestClientProtocol)? = nil

    /// Test defaults lower the bcrypt cost through the same setting a user has.
    static func configuration(_ folder: TemporaryFolder, _ change: (inout ServeConfiguration) -> Void = { _ in }) -> ServeConfiguration {
        var configuration = ServeConfiguration(databasePath: folder.databasePath)
        configuration.port = 0
        configuration.metricsListen = ListenAddress(host: "127.0.0.1", port: 0)
        configuration.bcryptCost = 4
        change(&configuration)
        return configuration
    }

    static func run<T: Sendable>(
        _ configuration: ServeConfiguration,
        transport: Transport = .router,
        logs: LogCapture = LogCapture(),
        pushSender: (any PushSender)? = nil,
        clock: ManualClock? = nil,
        _ body: @Sendable (TestDaemon) async throws -> T
    ) async throws -> T {
        let logger = logs.logger()
        let readiness = RunningServices.Readiness()
        let now: @Sendable () -> Date = { clock?.now ?? Date() }
        let server = try await buildApplication(
            configuration: configuration, logger: logger, pushSender: pushSender,
            onServerRunning: { port in readiness.ready(port: port) }, now: now)
        let hasher = BcryptPasswordHasher(cost: configuration.bcryptCost)
        if transport == .router {
            return try await server.application.test(.router) { client in
                try await body(TestDaemon(base: "http://no-socket.invalid", server: server, hasher: hasher, router: client))
            }
        }
        return try await RunningServices.run(server.services, readiness: readiness, logger: logger) { port in
            let daemon = TestDaemon(base: "http://127.0.0.1:\(port)", server: server, hasher: hasher)
            return try await body(daemon)
        }
    }

    // MARK: HTTP

    struct Answer: Sendable {
        let status: Int
        let headers: HTTPHeaders
        let bytes: [UInt8]

        var json: [String: any Sendable] {
            (try? JSONSerialization.jsonObject(with: Data(bytes)) as? [String: any Sendable]) ?? [:]
        }
        subscript(key: String) -> String? { json[key] as? String }
        var text: String { String(decoding: bytes, as: UTF8.self) }
    }

    func call(
        _ method: HTTPMethod,
        _ path: String,
        json: [String: any Sendable]? = nil,
        rawBody: [UInt8]? = nil,
        contentType: String? = "application/json",
        apiKey: String? = nil,
        headers: [(String, String)] = [],
        timeout: Duration = .seconds(40)
    ) async throws -> Answer {
        let body = try rawBody ?? json.map { Array(try JSONSerialization.data(withJSONObject: $0)) }
        if let router {
            return try await Self.call(router, method, path, body: body, contentType: contentType, apiKey: apiKey, headers: headers, timeout: timeout)
        }
        var request = HTTPClientRequest(url: base + path)
        request.method = method
        if let apiKey { request.headers.add(name: "X-API-Key", value: apiKey) }
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        if let body {
            if let contentType { request.headers.add(name: "Content-Type", value: contentType) }
            request.body = .bytes(ByteBuffer(bytes: body))
        }
        let response = try await HTTPClient.shared.execute(request, timeout: .init(timeout))
        let collected = try await response.body.collect(upTo: 1 << 20)
        return Answer(status: Int(response.status.code), headers: response.headers, bytes: Array(collected.readableBytesView))
    }

    /// A request through the router: the same head and body `call` sends over a socket.
    static func call(
        _ router: any TestClientProtocol, _ method: HTTPMethod, _ path: String, body: [UInt8]?, contentType: String?, apiKey: String?,
        headers: [(String, String)], timeout: Duration
    ) async throws -> Answer {
        var fields = HTTPFields()
        if let apiKey { fields.append(HTTPField(name: HTTPField.Name("X-API-Key")!, value: apiKey)) }
        for (name, value) in headers {
            guard let name = HTTPField.Name(name) else { throw TestFailure("not a header name: \(name)") }
            fields.append(HTTPField(name: name, value: value))
        }
        if body != nil, let contentType { fields.append(HTTPField(name: .contentType, value: contentType)) }
        guard let method = HTTPRequest.Method(method.rawValue) else { throw TestFailure("not a method: \(method)") }
        let head = fields
        let response = try await Self.bounded(timeout, "\(method) \(path)") {
            try await router.executeRequest(uri: path, method: method, headers: head, body: body.map { ByteBuffer(bytes: $0) })
        }
        var answerHeaders = HTTPHeaders()
        for field in response.headers { answerHeaders.add(name: field.name.rawName, value: field.value) }
        return Answer(status: Int(response.status.code), headers: answerHeaders, bytes: Array(response.body.readableBytesView))
    }

    /// `operation`'s result, or a failure once `timeout` has passed without one: a hang
    /// detector. The operation runs in a task of its own that is abandoned (cancelled,
    /// not awaited) on timeout, so that a wait that ignores cancellation still fails
    /// the test instead of hanging it. Cancelling the caller cancels the operation.
    static func bounded<Value: Sendable>(
        _ timeout: Duration, _ what: String, _ operation: @escaping @Sendable () async throws -> Value
    ) async throws -> Value {
        let (results, continuation) = AsyncStream.makeStream(of: Result<Value, any Error>.self)
        let work = Task {
            do { continuation.yield(.success(try await operation())) } catch { continuation.yield(.failure(error)) }
        }
        let timer = Task {
            try await Task.sleep(for: timeout)
            continuation.yield(.failure(TestFailure("\(what): no answer in \(timeout)")))
        }
        defer {
            work.cancel()
            timer.cancel()
        }
        // The stream's iterator ends when this task is cancelled.
        for await result in results { return try result.get() }
        throw CancellationError()
    }

    // MARK: Fixtures

    @discardableResult
    func createUser(_ email: String, password: String) async throws -> User {
        try await server.store.createUser(email: email, passwordHash: try await hasher.hash(password))
    }

    /// Logs a device in; returns its API key and device id.
    func login(
        _ email: String, password: String, device: String = "Phone", fcmToken: String = "unknown"
    ) async throws -> (apiKey: String, deviceID: String) {
        let answer = try await call(
            .POST, "/api/mobile/auth/login",
            json: ["email": email, "password": password, "deviceName": device, "platform": "iOS", "fcmToken": fcmToken])
        guard answer.status == 200, let key = answer["apiKey"], let device = answer.json["device"] as? [String: any Sendable],
            let id = device["id"] as? String
        else {
            throw TestFailure("login failed: \(answer.status) \(answer.text)")
        }
        return (key, id)
    }

    func initiate(_ email: String, newPassword: String) async throws -> (requestID: String, code: String?) {
        let answer = try await call(.POST, "/api/mobile/auth/reset/phone/initiate", json: ["email": email, "newPassword": newPassword])
        guard answer.status == 200, let id = answer["requestId"] else { throw TestFailure("initiate failed: \(answer.status) \(answer.text)") }
        return (id, answer["numberCode"])
    }

    /// A status poll; `timeout` is the client's (a long poll of 30 s given up after 25 s has been woken, if answered at all).
    func status(_ id: String, wait: Int? = nil, timeout: Duration = .seconds(40)) async throws -> Answer {
        try await call(.GET, "/api/mobile/auth/reset/phone/status/\(id)" + (wait.map { "?wait=\($0)" } ?? ""), timeout: timeout)
    }

    /// `/metrics`, from its own listener (the public one does not serve it).
    func metricsText() async throws -> String { try await metricsAnswer().text }

    /// `GET /metrics` on the metrics listener: status, `Content-Type`, text.
    func metricsAnswer() async throws -> (status: Int, contentType: String?, text: String) {
        let clock = ContinuousClock()
        let start = clock.now
        while server.metricsPort.value == nil {
            guard clock.now - start < .seconds(60) else { throw TestFailure("the metrics listener never came up") }
            try await Task.sleep(for: .milliseconds(10))
        }
        let port = server.metricsPort.value ?? 0
        let response = try await HTTPClient.shared.execute(HTTPClientRequest(url: "http://127.0.0.1:\(port)/metrics"), timeout: .seconds(30))
        let text = String(buffer: try await response.body.collect(upTo: 4 << 20))
        return (Int(response.status.code), response.headers.first(name: "Content-Type"), text)
    }

    /// `countersign_long_polls_waiting` now.
    func longPollsWaiting() async throws -> Int {
        let line = try await metricsText().split(separator: "\n").first { $0.hasPrefix("countersign_long_polls_waiting ") }
        return line.flatMap { Double($0.split(separator: " ").last ?? "") }.map { Int($0) } ?? 0
    }

    /// Returns once `count` long polls are parked (the daemon's `countersign_long_polls_waiting`):
    /// an event instead of a pause; the bound only turns a hang into a failure.
    func waitForLongPolls(_ count: Int) async throws {
        let clock = ContinuousClock()
        let start = clock.now
        while true {
            if try await longPollsWaiting() >= count { return }
            guard clock.now - start < .seconds(60) else { throw TestFailure("\(count) long polls never parked") }
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    func respond(_ id: String, apiKey: String, decision: String = "approve", code: String?) async throws -> Answer {
        var body: [String: any Sendable] = ["decision": decision]
        if let code { body["numberCode"] = code }
        return try await call(.POST, "/api/mobile/approvals/\(id)/respond", json: body, apiKey: apiKey)
    }

    func complete(_ id: String) async throws -> Answer {
        try await call(.POST, "/api/mobile/auth/reset/phone/complete/\(id)")
    }
}

/// The answer of a long poll asking to wait 30 s, if it came within 30 s of
/// being sent: then it can only be the wake-up (or an answer at once), and its
/// status is the test's to judge. Later, it may be the poll's own wait running
/// out (a suite on a busy machine can stall a test that long), which proves
/// nothing: `nil`, and a line saying so. Its client waits 40 s.
func answerWithinTheWait(_ poll: @Sendable () async throws -> TestDaemon.Answer) async throws -> TestDaemon.Answer? {
    let sent = ContinuousClock.now
    let answer = try await poll()
    let waited = ContinuousClock.now - sent
    guard waited < .seconds(30) else {
        print("a held poll answered after \(waited), status \(answer["status"] ?? "none"): not judged")
        return nil
    }
    return answer
}

struct TestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

import AsyncHTTPClient
import CountersignCore
import Foundation
import Logging
import NIOCore
import NIOHPACK
import NIOHTTP1
import Synchronization

/// Sends push messages through FCM HTTP v1 on one shared AsyncHTTPClient
/// (HTTP/2 over TLS: many sends share one connection).
///
/// Per message: a 401 `UNAUTHENTICATED` refreshes the access token and
/// retries once; dead tokens disable the device's push; 429/500/503 retry with
/// exponential back-off, jitter and `Retry-After`, never past the moment the
/// message stops being useful (a prompt's request expiry): such a push is
/// dropped, not sent late.
public final class FCMSender: PushSender {
    /// The sender's own parameters (where it sends, attempts, timeouts),
    /// made by ``PushSetup`` from what the operator configured (``PushConfiguration``).
    public struct Configuration: Sendable {
        /// `https://fcm.googleapis.com` in production; a local fake in tests.
        public var endpoint: String
        public var maxAttempts = 5
        public var baseBackoff: TimeInterval = 0.5
        public var requestTimeout: TimeInterval = 10
        /// Sends in flight on one connection before another is opened: no
        /// more than the concurrent streams the server allows (100 is HTTP/2's
        /// usual value), and fewer spreads the sends' HTTP/2 work over more
        /// event loops: the dispatcher's 64 in flight take two connections,
        /// 15–25% more messages/s than one on the benchmark's stub.
        public var sendsPerConnection = 32
        public var maximumConnections = 8
        /// A job's devices one send puts on the wire together (with ``streams``): one hop onto the
        /// connection's event loop and one wait for all their answers, not one each.
        public var sendsAtOnce = 8
        /// Opens another client like the one given to the sender, for a
        /// connection of its own; `nil`: every send shares that one.
        public var openConnection: (@Sendable () throws -> HTTPClient)?
        /// Where sends go when set (an `https://` endpoint: FCM's): frames on
        /// swift-nio-http2, not AsyncHTTPClient. `nil`: through the client
        /// given to the sender (and `openConnection`), as for an `http://` fake.
        public var streams: HTTP2PushClient?

        public init(endpoint: String = "https://fcm.googleapis.com") {
            self.endpoint = endpoint.hasSuffix("/") ? String(endpoint.dropLast()) : endpoint
        }
    }

    public let account: ServiceAccount
    public let tokens: AccessTokenProvider
    private let connections: PushConnections
    private let configuration: Configuration
    /// The retry loop, the dead-token store and the health record.
    private let delivery: PushDelivery
    /// The server offered no HTTP/2 to ``Configuration/streams``: sends go through the client instead.
    private let framesRefused = Atomic<Bool>(false)

    public init(
        account: ServiceAccount,
        tokens: AccessTokenProvider,
        client: HTTPClient,
        configuration: Configuration,
        deadTokens: (any PushTokenStore)?
    ) {
        self.account = account
        self.tokens = tokens
        self.connections = PushConnections(
            primary: client, sendsPerConnection: configuration.sendsPerConnection,
            maximumConnections: configuration.maximumConnections, open: configuration.openConnection)
        self.configuration = configuration
        self.delivery = PushDelivery(
            service: "FCM", maxAttempts: configuration.maxAttempts, baseBackoff: configuration.baseBackoff, deadTokens: deadTokens)
        self.sendPath = "/v1/projects/\(account.projectID)/messages:send"
        self.sendURL = configuration.endpoint + sendPath
    }

    /// How many connections the sends have used so far (through AsyncHTTPClient).
    public var connectionCount: Int { connections.count }

    /// The client sends go out on when they do not go through AsyncHTTPClient.
    public var streams: HTTP2PushClient? { configuration.streams }

    /// Shuts down the connections the sender opened beyond the client it was given, and its streams' client.
    public func shutdownOpenedConnections() async throws {
        await configuration.streams?.shutdown()
        try await connections.shutdownOpened()
    }

    /// `messages:send` of the account's project, made once: its path, and the whole URL.
    let sendPath: String
    let sendURL: String

    /// `ok`; `auth_error` (credentials or permissions refused, or a 404 naming no
    /// token: wrong project id or endpoint; the log line tells which), while nothing
    /// succeeded since; or `degraded` (a push gave up in the last five minutes and
    /// none succeeded since).
    public var health: PushHealth { delivery.record.health }

    public var providerHealth: [PushProvider: PushHealth] { [.fcm: health] }

    public var offer: PushOffer { PushOffer(providers: [.fcm]) }

    public func send(_ job: PushJob, to device: Device, logger: Logger) async -> PushOutcome {
        guard let address = device.push, address.provider == .fcm else { return .rejected }
        let token = address.token
        return await delivery.send(job, to: device, token: token, logger: logger) {
            do {
                try await post(bodies.body(for: job, token: token, now: Date()))
            } catch let failure as FCMFailure {
                throw failure.refusal
            }
        }
    }

    /// Each job's message written once for all its devices.
    private let bodies = FCMJobBodies()

    /// The wait before retry `attempt` (see ``PushDelivery/backoff(attempt:retryAfter:)``).
    func backoff(attempt: Int, retryAfter: TimeInterval?) -> TimeInterval {
        delivery.backoff(attempt: attempt, retryAfter: retryAfter)
    }

    /// One `messages:send` call; throws ``FCMFailure`` on any refusal.
    public func post(_ message: FCMMessage, validateOnly: Bool) async throws {
        try await post(FCMMessageBuilder.body(of: message, validateOnly: validateOnly))
    }

    /// One `messages:send` call with `body` as it is; throws ``FCMFailure`` on any refusal.
    func post(_ body: ByteBuffer) async throws {
        let accessToken = try await tokens.token()
        let timeout = TimeAmount.seconds(Int64(configuration.requestTimeout))
        let status: Int
        let retryAfter: String?
        let answer: ByteBuffer
        var framed: HTTP2PushClient.Response?
        if let streams = configuration.streams, !framesRefused.load(ordering: .relaxed) {
            do {
                framed = try await streams.post(
                    path: sendPath,
                    headers: [("authorization", "Bearer \(accessToken)"), ("content-type", "application/json; charset=utf-8")],
                    body: body, timeout: timeout)
            } catch let failure as HTTP2PushClient.Failure where failure.noHTTP2 {
                // Something between us and FCM speaks only HTTP/1.1 (a TLS-inspecting proxy): from now on, the client.
                framesRefused.store(true, ordering: .relaxed)
            }
        }
        if let framed {
            (status, retryAfter, answer) = (framed.status, framed.headers.first(name: "retry-after"), framed.body)
        } else {
            var request = HTTPClientRequest(url: sendURL)
            request.method = .POST
            request.headers.add(name: "Authorization", value: "Bearer \(accessToken)")
            request.headers.add(name: "Content-Type", value: "application/json; charset=utf-8")
            request.body = .bytes(body)
            let (response, collected) = try await connections.withClient { client in
                let response = try await client.execute(request, timeout: timeout)
                return (response, try await response.body.collect(upTo: 64 * 1024))
            }
            (status, retryAfter, answer) = (Int(response.status.code), response.headers.first(name: "Retry-After"), collected)
        }
        try await check(status: status, retryAfter: retryAfter, answer: answer, accessToken: accessToken)
    }

    /// Throws ``FCMFailure`` for an answer other than 200; a stale access token is dropped first.
    private func check(status: Int, retryAfter: String?, answer: ByteBuffer, accessToken: String) async throws {
        guard status == 200 else {
            let failure = FCMFailure.classify(
                httpStatus: status, body: Data(answer.readableBytesView), retryAfter: FCMFailure.retryAfter(retryAfter, now: Date()))
            if failure.needsFreshToken { await tokens.invalidate(accessToken) }
            throw failure
        }
    }

    /// How many of a job's devices one send takes (see ``send(_:to:logger:settled:)``): with frames on
    /// swift-nio-http2, ``Configuration/sendsAtOnce``; through AsyncHTTPClient, one.
    public func devicesPerSend(_ provider: PushProvider) -> Int {
        configuration.streams != nil && !framesRefused.load(ordering: .relaxed) ? max(1, configuration.sendsAtOnce) : 1
    }

    /// A job's message to many devices: with frames on swift-nio-http2, every first attempt goes out at once
    /// (``HTTP2PushClient/postAll(path:headers:bodies:timeout:)``). A device whose message went through is
    /// settled then; any other goes on, in a task of its own, through the same retry loop as a single send, its
    /// first attempt being the one made.
    public func send(_ job: PushJob, to devices: [Device], logger: Logger, settled: @escaping @Sendable (Int, PushOutcome) -> Void) async {
        guard devices.count > 1, let streams = configuration.streams, !framesRefused.load(ordering: .relaxed),
            devices.allSatisfy({ $0.push?.provider == .fcm })
        else {
            return await sendEach(job, to: devices, logger: logger, settled: settled)
        }
        let now = Date()
        let messages: [Result<ByteBuffer, any Error>] = devices.map { device in
            Result { try bodies.body(for: job, token: device.push?.token ?? "", now: now) }.mapError { ($0 as? FCMFailure)?.refusal ?? $0 }
        }
        let written = messages.compactMap { try? $0.get() }
        var firstAttempts: [FirstAttempt] = []
        firstAttempts.reserveCapacity(devices.count)
        if written.isEmpty {
            // Too late or too large for every device: nothing to send, no token to fetch.
            for message in messages { if case .failure(let error) = message { firstAttempts.append(.failed(error)) } }
        } else {
            guard let accessToken = try? await tokens.token() else { return await sendEach(job, to: devices, logger: logger, settled: settled) }
            let answers = await streams.postAll(
                path: sendPath,
                headers: [("authorization", "Bearer \(accessToken)"), ("content-type", "application/json; charset=utf-8")],
                bodies: written, timeout: .seconds(Int64(configuration.requestTimeout)))
            var next = answers.makeIterator()
            for message in messages {
                if case .failure(let error) = message {
                    firstAttempts.append(.failed(error))
                    continue
                }
                switch next.next() {
                case .success(let answer):
                    do {
                        try await check(
                            status: answer.status, retryAfter: answer.headers.first(name: "retry-after"), answer: answer.body,
                            accessToken: accessToken)
                        firstAttempts.append(.sent)
                    } catch let failure as FCMFailure {
                        firstAttempts.append(.failed(failure.refusal))
                    } catch {
                        firstAttempts.append(.failed(error))
                    }
                case .failure(let failure as HTTP2PushClient.Failure) where failure.noHTTP2:
                    // Something between us and FCM speaks only HTTP/1.1: nothing was sent; from now on, the client.
                    framesRefused.store(true, ordering: .relaxed)
                    firstAttempts.append(.notMade)
                case .failure(let error):
                    firstAttempts.append(.failed(error))
                case nil:
                    firstAttempts.append(.notMade)
                }
            }
        }
        await withDiscardingTaskGroup { group in
            for (index, device) in devices.enumerated() {
                let first = firstAttempts[index]
                if case .sent = first {
                    settled(index, delivery.alreadySent(to: device, token: device.push?.token ?? "", logger: logger))
                } else {
                    group.addTask { settled(index, await self.settle(job, device, first: first, logger: logger)) }
                }
            }
        }
    }

    /// What became of a device's message in a send to many.
    private enum FirstAttempt: Sendable {
        case sent
        case failed(any Error)
        /// Not tried: the device's sends start from the first.
        case notMade
    }

    /// One device's outcome after a first attempt that did not go through; further attempts are sends of their own.
    private func settle(_ job: PushJob, _ device: Device, first: FirstAttempt, logger: Logger) async -> PushOutcome {
        let token = device.push?.token ?? ""
        let made: (any Error)? = if case .failed(let error) = first { error } else { nil }
        return await delivery.send(job, to: device, token: token, logger: logger, made: made) {
            do {
                try await post(bodies.body(for: job, token: token, now: Date()))
            } catch let failure as FCMFailure {
                throw failure.refusal
            }
        }
    }
}

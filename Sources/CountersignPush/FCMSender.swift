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
        /// Opens another client like the one given to the sender, for a
        /// connection of its own; `nil`: every send shares that one.
        public var openConnection: (@Sendable () throws -> HTTPClient)?
        /// Where sends go when set (an `https://` endpoint: FCM's): frames on
        /// swift-nio-http2, not AsyncHTTPClient. `nil`: through the client
        /// given to the sender (and `openConnection`), as for an `http://` fake.
        public var streams: HTTP2PushClient?

        /// Whether messages are sealed to the devices' sealing keys (``SealedMessages``).
        public var sealedPush = SealedPushPolicy.optional

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
                if SealedMessages.applies(to: device, policy: configuration.sealedPush) {
                    // Written for this device alone: a fresh encapsulation per message.
                    guard let readable = FCMMessageBuilder.message(for: job, token: token, now: Date()) else {
                        throw PushRefusal(.tooLate, reason: "expired")
                    }
                    try await post(FCMMessageBuilder.body(of: SealedMessages.form(of: readable, key: device.sealKey)))
                } else {
                    try await post(bodies.body(for: job, token: token, now: Date()))
                }
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
        guard status == 200 else {
            let failure = FCMFailure.classify(
                httpStatus: status, body: Data(answer.readableBytesView), retryAfter: FCMFailure.retryAfter(retryAfter, now: Date()))
            if failure.needsFreshToken { await tokens.invalidate(accessToken) }
            throw failure
        }
    }
}

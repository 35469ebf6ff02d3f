import AsyncHTTPClient
import CountersignCore
import Foundation
import Logging
import NIOCore
import NIOHTTP1

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
        self.sendURL = "\(configuration.endpoint)/v1/projects/\(account.projectID)/messages:send"
    }

    /// How many connections the sends have used so far.
    public var connectionCount: Int { connections.count }

    /// Shuts down the connections the sender opened beyond the client it was given.
    public func shutdownOpenedConnections() async throws {
        try await connections.shutdownOpened()
    }

    /// `messages:send` of the account's project, made once.
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
            guard let message = FCMMessageBuilder.message(for: job, token: token, now: Date()) else {
                throw PushRefusal(.tooLate, reason: "expired")
            }
            do {
                try await post(message, validateOnly: false)
            } catch let failure as FCMFailure {
                throw failure.refusal
            }
        }
    }

    /// The wait before retry `attempt` (see ``PushDelivery/backoff(attempt:retryAfter:)``).
    func backoff(attempt: Int, retryAfter: TimeInterval?) -> TimeInterval {
        delivery.backoff(attempt: attempt, retryAfter: retryAfter)
    }

    /// One `messages:send` call; throws ``FCMFailure`` on any refusal.
    public func post(_ message: FCMMessage, validateOnly: Bool) async throws {
        guard let body = try FCMMessageBuilder.encode(message, validateOnly: validateOnly) else {
            throw FCMFailure(.invalidArgument, httpStatus: 0, message: "message larger than \(FCMMessageBuilder.maximumBytes) bytes")
        }
        let accessToken = try await tokens.token()
        var request = HTTPClientRequest(url: sendURL)
        request.method = .POST
        request.headers.add(name: "Authorization", value: "Bearer \(accessToken)")
        request.headers.add(name: "Content-Type", value: "application/json; charset=utf-8")
        request.body = .bytes(ByteBuffer(bytes: body))
        let timeout = TimeAmount.seconds(Int64(configuration.requestTimeout))
        let (response, answer) = try await connections.withClient { client in
            let response = try await client.execute(request, timeout: timeout)
            return (response, try await response.body.collect(upTo: 64 * 1024))
        }
        guard response.status == .ok else {
            let retryAfter = FCMFailure.retryAfter(response.headers.first(name: "Retry-After"), now: Date())
            let failure = FCMFailure.classify(httpStatus: Int(response.status.code), body: Data(answer.readableBytesView), retryAfter: retryAfter)
            if failure.needsFreshToken { await tokens.invalidate(accessToken) }
            throw failure
        }
    }
}

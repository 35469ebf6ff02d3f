import AsyncHTTPClient
import CountersignCore
import Foundation
import Logging
import NIOCore
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
    /// Told when FCM says a device's token is dead; `nil` when the sends are
    /// for no registered device (`fcm check`, the benchmark).
    private let deadTokens: (any PushTokenStore)?
    private let configuration: Configuration
    private let record = Mutex(HealthRecord())

    struct HealthRecord {
        var lastSuccess: Date?
        var lastAuthFault: Date?
        var lastGiveUp: Date?
    }

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
        self.deadTokens = deadTokens
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
    public var health: PushHealth {
        record.withLock { record in
            let success = record.lastSuccess ?? .distantPast
            if let fault = record.lastAuthFault, fault > success { return .authError }
            if let giveUp = record.lastGiveUp, giveUp > success, giveUp.timeIntervalSinceNow > -300 { return .degraded }
            return .ok
        }
    }

    public func send(_ job: PushJob, to device: Device, logger: Logger) async -> PushOutcome {
        guard let token = device.fcmToken else { return .rejected }
        // The device's metadata is built only when a line is logged: most sends log none.
        let logger = DeviceLogger(base: logger, deviceID: device.id, token: token)
        let deadline: Date =
            switch job {
            case .prompt(_, _, _, let expiresAt, _, _): expiresAt
            case .resolved, .deviceAdded: Date().addingTimeInterval(FCMMessageBuilder.resolutionTTL)
            }
        let outcome = await deliver(job, token: token, deadline: deadline, logger: logger)
        switch outcome {
        case .tokenDead:
            guard let deadTokens else { break }
            do {
                try await deadTokens.disablePush(deviceID: device.id, fcmToken: token)
            } catch {
                logger.tagged.error("cannot disable push for a dead token", metadata: ["error": "\(error)"])
            }
        case .sent:
            record.withLock { $0.lastSuccess = Date() }
        case .dropped:
            record.withLock { $0.lastGiveUp = Date() }
        case .authError, .misconfigured:
            record.withLock { $0.lastAuthFault = Date() }
        case .rejected, .disabled:
            break
        }
        return outcome
    }

    private func deliver(_ job: PushJob, token: String, deadline: Date, logger: DeviceLogger) async -> PushOutcome {
        var refreshedAfter401 = false
        var attempt = 0
        while true {
            attempt += 1
            guard let message = FCMMessageBuilder.message(for: job, token: token, now: Date()), Date() < deadline else {
                logger.tagged.notice("push dropped: it can no longer arrive before the request expires")
                return .dropped
            }
            do {
                try await post(message, validateOnly: false)
                if logger.base.logLevel <= .debug { logger.tagged.debug("push sent", metadata: ["attempt": "\(attempt)"]) }
                return .sent
            } catch let failure as FCMFailure {
                if failure.needsFreshToken && !refreshedAfter401 {
                    refreshedAfter401 = true
                    logger.tagged.notice("FCM refused the access token; refreshing it and retrying once")
                    continue
                }
                if failure.tokenIsDead {
                    logger.tagged.notice("push token is dead; push disabled for this device", metadata: ["fcm": "\(failure.shortDescription)"])
                    return .tokenDead
                }
                if failure.isAuthFault || failure.needsFreshToken {
                    logger.tagged.error(
                        "FCM refused our credentials; nothing disabled",
                        metadata: ["fcm": "\(failure.shortDescription)", "detail": "\(failure.message)", "check": "\(failure.hint)"])
                    return .authError
                }
                if failure.isMisconfiguration {
                    logger.tagged.error(
                        "FCM does not know where we send; nothing disabled",
                        metadata: ["fcm": "\(failure.shortDescription)", "detail": "\(failure.message)", "check": "\(failure.hint)"])
                    return .misconfigured
                }
                guard failure.isRetryable else {
                    logger.tagged.error("FCM rejected the message", metadata: ["fcm": "\(failure.shortDescription)", "detail": "\(failure.message)"])
                    return .rejected
                }
                guard attempt < configuration.maxAttempts else {
                    logger.tagged.warning("push gave up after \(attempt) attempts", metadata: ["fcm": "\(failure.shortDescription)"])
                    return .dropped
                }
                let delay = backoff(attempt: attempt, retryAfter: failure.retryAfter)
                guard Date().addingTimeInterval(delay) < deadline else {
                    logger.tagged.notice(
                        "push dropped: the next retry would come after the request expires", metadata: ["fcm": "\(failure.shortDescription)"])
                    return .dropped
                }
                logger.tagged.debug("push will be retried", metadata: ["fcm": "\(failure.shortDescription)", "in": "\(delay)"])
                try? await Task.sleep(for: .seconds(delay))
            } catch {
                // Connection failures: retried like UNAVAILABLE.
                guard attempt < configuration.maxAttempts else {
                    logger.tagged.warning("push gave up after \(attempt) attempts", metadata: ["error": "\(error)"])
                    return .dropped
                }
                let delay = backoff(attempt: attempt, retryAfter: nil)
                guard Date().addingTimeInterval(delay) < deadline else { return .dropped }
                logger.tagged.debug("push will be retried after a transport error", metadata: ["error": "\(error)"])
                try? await Task.sleep(for: .seconds(delay))
            }
        }
    }

    /// Exponential back-off with jitter (×0.5…1.5), never shorter than `Retry-After`.
    func backoff(attempt: Int, retryAfter: TimeInterval?) -> TimeInterval {
        let exponential = configuration.baseBackoff * pow(2, Double(attempt - 1)) * Double.random(in: 0.5...1.5)
        return max(exponential, retryAfter ?? 0)
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

/// A send's logger, tagged with its device and token suffix when a line is written.
struct DeviceLogger {
    let base: Logger
    let deviceID: String
    let token: String

    var tagged: Logger {
        var logger = base
        logger[metadataKey: "device"] = "\(deviceID)"
        logger[metadataKey: "token"] = "\(Device.tokenSuffix(token))"
        return logger
    }
}

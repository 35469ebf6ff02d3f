import AsyncHTTPClient
import CountersignCore
import Foundation
import Logging
import NIOCore
import Synchronization

/// One push attempt refused, sorted the same way for every provider.
public struct PushRefusal: Error, Sendable, CustomStringConvertible {
    public enum Kind: Sendable, Equatable {
        /// The token or endpoint is dead: stop pushing to the device until it sends a new one.
        case tokenDead
        /// Our credential (access token, provider token) was refused as stale: refresh it once and retry once.
        case staleCredential
        /// Our credentials were refused: nothing disabled, health shows it.
        case authFault
        /// We send to a wrong address (project, endpoint): nothing disabled, health shows it.
        case misconfigured
        /// Worth another try after a back-off (429, 5xx, a transport failure).
        case retryable
        /// Refused for good; not retried.
        case rejected
        /// The message can no longer arrive before the request expires.
        case tooLate
    }

    public var kind: Kind
    /// The provider's word for it, safe for logs (`unregistered`, `BadDeviceToken`, `http_413`).
    public var reason: String
    /// The provider's message, bounded; never our secrets.
    public var detail: String
    /// What an operator should check, for a configuration fault.
    public var hint: String?
    /// Seconds from `Retry-After`, when given.
    public var retryAfter: TimeInterval?

    public init(_ kind: Kind, reason: String, detail: String = "", hint: String? = nil, retryAfter: TimeInterval? = nil) {
        self.kind = kind
        self.reason = reason
        self.detail = detail
        self.hint = hint
        self.retryAfter = retryAfter
    }

    public var description: String { detail.isEmpty ? reason : "\(reason): \(detail)" }

    /// A message that could not be made for `job`: a prompt whose request
    /// expires within the second is too late; anything else is too large, a bug.
    static func unsendable(_ job: PushJob, now: Date = Date()) -> PushRefusal {
        if case .prompt(_, _, _, let expiresAt, _, _) = job, expiresAt.timeIntervalSince(now) < 1 {
            return PushRefusal(.tooLate, reason: "expired")
        }
        return PushRefusal(.rejected, reason: "too_large", detail: "the message does not fit the provider's size limit")
    }
}

extension HTTPClientResponse.Body {
    /// The first `limit` bytes of an answer's body; the rest is read and dropped
    /// (a large body is no reason to send again what was accepted).
    func prefix(_ limit: Int) async throws -> Data {
        var kept = Data()
        for try await chunk in self where kept.count < limit {
            kept.append(contentsOf: chunk.readableBytesView.prefix(limit - kept.count))
        }
        return kept
    }
}

/// The retry loop every provider's sends share: one refresh of a stale
/// credential, dead tokens reported, exponential back-off with jitter and
/// `Retry-After`, never past the moment the message stops being useful (a
/// prompt's request expiry): such a push is dropped, not sent late.
struct PushDelivery: Sendable {
    /// `FCM`, `APNs`, `Web Push`: how log lines name the service.
    var service: String
    var maxAttempts = 5
    var baseBackoff: TimeInterval = 0.5
    /// Told when the service says a device's token is dead; `nil` when the sends are
    /// for no registered device (`push check`, the benchmark).
    var deadTokens: (any PushTokenStore)?
    /// How the provider's sends are going, for `/healthz`.
    let record = PushHealthRecord()

    /// One message to one device: ``run(deadline:logger:attempt:)`` until its
    /// deadline, then the device's push turned off if its token is dead, and the outcome noted for health.
    func send(_ job: PushJob, to device: Device, token: String, logger: Logger, attempt: () async throws -> Void) async -> PushOutcome {
        // The device's metadata is built only when a line is logged: most sends log none.
        let logger = DeviceLogger(base: logger, deviceID: device.id, token: token)
        let outcome = await run(deadline: Self.deadline(of: job), logger: logger, attempt: attempt)
        if outcome == .tokenDead { await disable(device, token: token, in: deadTokens, logger: logger) }
        record.note(outcome)
        return outcome
    }

    /// Runs `attempt` until it succeeds or the outcome is final. `attempt`
    /// throws a ``PushRefusal``; any other error is a transport failure, retried.
    func run(deadline: Date, logger: DeviceLogger, attempt: () async throws -> Void) async -> PushOutcome {
        var refreshed = false
        var attempts = 0
        while true {
            attempts += 1
            guard Date() < deadline else {
                logger.tagged.notice("push dropped: it can no longer arrive before the request expires")
                return .dropped
            }
            let refusal: PushRefusal
            do {
                try await attempt()
                if logger.base.logLevel <= .debug { logger.tagged.debug("push sent", metadata: ["attempt": "\(attempts)"]) }
                return .sent
            } catch let caught as PushRefusal {
                refusal = caught
            } catch {
                refusal = PushRefusal(.retryable, reason: "transport", detail: "\(error)")
            }
            var metadata: Logger.Metadata = ["provider": "\(service)", "reason": "\(refusal.reason)"]
            if refusal.kind == .retryable, !refusal.detail.isEmpty { metadata["detail"] = "\(refusal.detail)" }
            switch refusal.kind {
            case .tooLate:
                logger.tagged.notice("push dropped: it can no longer arrive before the request expires")
                return .dropped
            case .staleCredential where !refreshed:
                refreshed = true
                logger.tagged.notice("\(service) refused our credential as stale; refreshing it and retrying once", metadata: metadata)
                continue
            case .tokenDead:
                logger.tagged.notice("push token is dead; push disabled for this device", metadata: metadata)
                return .tokenDead
            case .authFault, .staleCredential:
                logger.tagged.error(
                    "\(service) refused our credentials; nothing disabled",
                    metadata: metadata.merging(["detail": "\(refusal.detail)", "check": "\(refusal.hint ?? "")"]) { $1 })
                return .authError
            case .misconfigured:
                logger.tagged.error(
                    "\(service) does not know where we send; nothing disabled",
                    metadata: metadata.merging(["detail": "\(refusal.detail)", "check": "\(refusal.hint ?? "")"]) { $1 })
                return .misconfigured
            case .rejected:
                logger.tagged.error("\(service) rejected the message", metadata: metadata.merging(["detail": "\(refusal.detail)"]) { $1 })
                return .rejected
            case .retryable:
                guard attempts < maxAttempts else {
                    logger.tagged.warning("push gave up after \(attempts) attempts", metadata: metadata)
                    return .dropped
                }
                let delay = backoff(attempt: attempts, retryAfter: refusal.retryAfter)
                guard Date().addingTimeInterval(delay) < deadline else {
                    logger.tagged.notice("push dropped: the next retry would come after the request expires", metadata: metadata)
                    return .dropped
                }
                logger.tagged.debug("push will be retried", metadata: metadata.merging(["in": "\(delay)"]) { $1 })
                try? await Task.sleep(for: .seconds(delay))
            }
        }
    }

    /// Exponential back-off with jitter (×0.5…1.5), never shorter than `Retry-After`.
    func backoff(attempt: Int, retryAfter: TimeInterval?) -> TimeInterval {
        let exponential = baseBackoff * pow(2, Double(attempt - 1)) * Double.random(in: 0.5...1.5)
        return max(exponential, retryAfter ?? 0)
    }

    /// When a message for `job` stops being useful: a prompt's request expiry, a notice's 5 minutes.
    static func deadline(of job: PushJob, now: Date = Date()) -> Date {
        switch job {
        case .prompt(_, _, _, let expiresAt, _, _): expiresAt
        case .resolved, .deviceAdded, .codesLocked: now.addingTimeInterval(FCMMessageBuilder.resolutionTTL)
        }
    }
}

/// How one provider's sends are going, for `/healthz`: `auth_error` while a
/// credentials or address fault is newer than the last success, `degraded`
/// while a give-up in the last five minutes is, else `ok`.
final class PushHealthRecord: Sendable {
    private struct Record {
        var lastSuccess: Date?
        var lastAuthFault: Date?
        var lastGiveUp: Date?
    }
    private let record = Mutex(Record())

    func note(_ outcome: PushOutcome) {
        switch outcome {
        case .sent: record.withLock { $0.lastSuccess = Date() }
        case .dropped: record.withLock { $0.lastGiveUp = Date() }
        case .authError, .misconfigured: record.withLock { $0.lastAuthFault = Date() }
        case .tokenDead, .rejected, .disabled: break
        }
    }

    var health: PushHealth {
        record.withLock { record in
            let success = record.lastSuccess ?? .distantPast
            if let fault = record.lastAuthFault, fault > success { return .authError }
            if let giveUp = record.lastGiveUp, giveUp > success, giveUp.timeIntervalSinceNow > -300 { return .degraded }
            return .ok
        }
    }
}

/// Tells the store that a device's token or endpoint is dead, unless it changed meanwhile.
func disable(_ device: Device, token: String, in deadTokens: (any PushTokenStore)?, logger: DeviceLogger) async {
    guard let deadTokens else { return }
    do {
        try await deadTokens.disablePush(deviceID: device.id, token: token)
    } catch {
        logger.tagged.error("cannot disable push for a dead token", metadata: ["error": "\(error)"])
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

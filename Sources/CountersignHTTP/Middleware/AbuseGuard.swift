import CountersignCore
import Foundation
import Hummingbird
import Logging

/// Rate limits as the routes use them: each refusal is a 429 with the
/// contract's body and an audit event.
struct AbuseGuard: Sendable {
    let limits: RateLimits
    let audit: AuditLog
    let metrics: AppMetrics

    enum Message {
        static let resets = "Too many reset attempts. Please try again later."
        static let logins = "Too many failed sign-in attempts. Please try again later."
        static let refresh = "Too many wrong passwords. Please try again later."
        static let polls = "Too many status requests. Please slow down."
        static let answers = "Too many answers from this device. Please try again later."
    }

    /// Counts one event; throws 429 when over the limit.
    func hit(
        _ name: RateLimitName, _ key: String, _ message: String, context: AppRequestContext, request: Request,
        userID: String? = nil, email: String? = nil
    ) throws {
        try enforce(limits[name].hit(key), name, message, context: context, request: request, userID: userID, email: email)
    }

    /// Throws 429 when `key` is already over a failure limit (counts nothing).
    func check(
        _ name: RateLimitName, _ key: String, _ message: String, context: AppRequestContext, request: Request,
        userID: String? = nil, email: String? = nil
    ) throws {
        try enforce(limits[name].check(key), name, message, context: context, request: request, userID: userID, email: email)
    }

    func recordFailure(_ name: RateLimitName, _ key: String) {
        limits[name].record(key)
    }

    /// `retryAfter` is the limiter's answer: `nil` lets the request through.
    private func enforce(
        _ retryAfter: Int?, _ name: RateLimitName, _ message: String, context: AppRequestContext, request: Request, userID: String?,
        email: String?
    ) throws {
        guard let retryAfter else { return }
        metrics.rateLimited(name)
        context.logger.notice("rate limited", metadata: ["limit": "\(name.rawValue)", "ip": "\(context.clientIP)"])
        audit.record(AuditEvent(kind: .rateLimited, userID: userID, email: email, context: request.auditContext(context), detail: name.rawValue))
        throw APIError(.tooManyRequests, "rate_limited", message, retryAfter: retryAfter)
    }
}

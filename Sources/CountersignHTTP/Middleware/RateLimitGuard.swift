import CountersignCore
import CountersignServices
import Foundation
import Hummingbird
import Logging

/// Rate limits as the routes use them: each refusal is a 429 with the
/// contract's body and a metric. The first refusal of a limit, key and window
/// is audited at once; the later ones of that window are counted and written
/// as one summary when it ends (``RefusalReporter``), so a flood cannot fill
/// the disk and a `kill -9` loses at most a summary's count.
struct RateLimitGuard: Sendable {
    let limits: LimitCounters
    let metrics: AppMetrics
    /// Where a window's first refusal is written before its 429 is answered.
    let auditStore: any AuditStore

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
    ) async throws {
        _ = try await reserve(name, key, message, context: context, request: request, userID: userID, email: email)
    }

    /// Counts an attempt before its work is done (failure limits): throws 429
    /// when over the limit. ``refund(_:_:)`` takes it back when it succeeds.
    /// Out of line: inlined, its locals would widen the async frame of every
    /// route that counts, which a waiting long poll keeps.
    @inline(never)
    func reserve(
        _ name: RateLimitName, _ key: String, _ message: String, context: AppRequestContext, request: Request,
        userID: String? = nil, email: String? = nil
    ) async throws -> WindowCounter.Reservation {
        // Made only for the first refusal of a window (most attempts are admitted), and written then.
        var first: AuditEvent?
        func refusal() -> AuditEvent {
            let event = AuditEvent(
                kind: .rateLimited, userID: userID, email: email, context: request.auditContext(context), detail: "\(name.rawValue): \(key)")
            first = event
            return event
        }
        let limiter = limits[name]
        let admission: WindowCounter.Admission
        if let shared = limits.shared {
            let (decided, opened) = try await shared.reserve(name, key: key, limit: limiter.limit, now: limits.now())
            admission = decided
            if case .refused = decided {
                // Reported once per window by this node, like its own refusals.
                limiter.noteRefusal(key, opened: opened, refusal: refusal())
            }
        } else {
            admission = limiter.reserve(key, now: limits.now(), refusal: refusal())
        }
        switch admission {
        case .admitted(let reservation):
            return reservation
        case .refused(let retryAfter):
            metrics.rateLimited(name)
            // Durable before the answer: a `kill -9` may lose a summary's count, never the first event.
            if let first {
                do {
                    try await auditStore.append([first])
                } catch {
                    // Refused all the same: the limit holds when the trail cannot be written.
                    context.logger.error("cannot write the audit event of a rate-limit refusal", metadata: ["error": "\(error)"])
                }
            }
            throw APIError(.tooManyRequests, "rate_limited", message, retryAfter: retryAfter)
        }
    }

    func refund(_ name: RateLimitName, _ reservation: WindowCounter.Reservation) async {
        if let shared = limits.shared {
            // A refund that does not reach the database leaves the attempt counted: the safe side.
            try? await shared.refund(name, reservation)
        } else {
            limits[name].refund(reservation)
        }
    }

    /// Runs `verify` (a password check) as an attempt counted beforehand
    /// against each failure limit, so that a burst of parallel guesses cannot
    /// pass the limit: 429 once any limit is full. The attempt stays counted
    /// when `verify` says no; it is refunded when it says yes, or throws before
    /// reaching a verdict (the hashing queue was full).
    func attempt(
        against keys: [(RateLimitName, String)], _ message: String, context: AppRequestContext, request: Request,
        userID: String? = nil, email: String? = nil, _ verify: () async throws -> Bool
    ) async throws -> Bool {
        var held: [(RateLimitName, WindowCounter.Reservation)] = []
        func refundAll() async { for (name, reservation) in held { await refund(name, reservation) } }
        do {
            for (name, key) in keys {
                held.append((name, try await reserve(name, key, message, context: context, request: request, userID: userID, email: email)))
            }
            let verified = try await verify()
            if verified { await refundAll() }
            return verified
        } catch {
            await refundAll()
            throw error
        }
    }
}

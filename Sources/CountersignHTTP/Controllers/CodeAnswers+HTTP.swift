import CountersignCore
import Foundation
import Hummingbird

extension CodeAnswers {
    /// Checks a typed code as an attempt counted beforehand against the
    /// route's limit of wrong codes, `counted` (a burst of parallel guesses
    /// cannot pass it): per client address on the phone-reset route, per
    /// (integration, user) on `/v1`, so that one end user's guesses never lock
    /// out a relying service's other users. The count is given back for a
    /// right code, and for a refusal that came before any code was looked at
    /// (no such request, not pending); any other failure keeps it, so that an
    /// error cannot make a guess free.
    /// Answers the approved request, or 400 `invalid_code`; 429 while the user's codes are locked.
    func answer(
        _ code: AnswerCode, to id: String, integrationID: String?, counted: (RateLimitName, String), abuse: RateLimitGuard,
        context: AppRequestContext, request: Request
    ) async throws -> ApprovalRequest {
        var approved: ApprovalRequest?
        var failure: (any Error)?
        let right = try await abuse.attempt(
            against: [counted], "Too many wrong codes. Please try again later.", context: context, request: request
        ) {
            do {
                let outcome = try await answer(
                    code, to: id, integrationID: integrationID, context: request.auditContext(context), logger: context.logger)
                guard case .approved(let request) = outcome else { return false }
                approved = request
                return true
            } catch let refusal as BrokerError {
                throw refusal
            } catch let locked as Locked {
                // Not a guess of this route's: the user's bound refused it before the code was looked at.
                throw locked
            } catch {
                failure = error
                return false
            }
        }
        if let failure { throw failure }
        guard right, let approved else { throw APIError.invalidAnswerCode }
        return approved
    }
}

extension APIError {
    /// The user's codes are locked for the day (trust.md, "A code has one purpose").
    static func codesLocked(until: Date, now: Date = Date()) -> APIError {
        APIError(
            .tooManyRequests, "rate_limited",
            "Too many wrong codes for this account. Codes are refused until the lock ends or an operator lifts it.",
            retryAfter: max(1, Int(until.timeIntervalSince(now).rounded(.up))))
    }
}

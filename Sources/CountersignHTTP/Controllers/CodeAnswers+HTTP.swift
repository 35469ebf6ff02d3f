import CountersignCore
import Hummingbird

extension CodeAnswers {
    /// Checks a typed code as an attempt counted beforehand against
    /// `verifyCodePerIP` (a burst of parallel guesses cannot pass it). The
    /// count is given back for a right code, and for a refusal that came
    /// before any code was looked at (no such request, not pending); any other
    /// failure keeps it, so that an error cannot make a guess free.
    /// Answers the approved request, or 400 `invalid_code`.
    func answer(
        _ code: AnswerCode, to id: String, integrationID: String?, abuse: RateLimitGuard, context: AppRequestContext, request: Request
    ) async throws -> ApprovalRequest {
        var approved: ApprovalRequest?
        var failure: (any Error)?
        let right = try await abuse.attempt(
            against: [(.verifyCodePerIP, context.clientKey)], "Too many wrong codes. Please try again later.", context: context, request: request
        ) {
            do {
                let outcome = try await answer(
                    code, to: id, integrationID: integrationID, context: request.auditContext(context), logger: context.logger)
                guard case .approved(let request) = outcome else { return false }
                approved = request
                return true
            } catch let refusal as BrokerError {
                throw refusal
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

import CountersignCore
import Hummingbird

extension CodeAnswers {
    /// Checks a typed code as an attempt counted beforehand against
    /// `verifyCodePerIP` (a burst of parallel guesses cannot pass it; a right
    /// code gives its count back): the approved request, or 400 `invalid_code`.
    func answer(
        _ code: AnswerCode, to id: String, integrationID: String?, abuse: AbuseGuard, context: AppRequestContext, request: Request
    ) async throws -> ApprovalRequest {
        var approved: ApprovalRequest?
        let right = try await abuse.attempt(
            against: [(.verifyCodePerIP, context.clientKey)], "Too many wrong codes. Please try again later.", context: context, request: request
        ) {
            let outcome = try await answer(code, to: id, integrationID: integrationID, context: request.auditContext(context), logger: context.logger)
            guard case .approved(let request) = outcome else { return false }
            approved = request
            return true
        }
        guard right, let approved else { throw APIError.invalidAnswerCode }
        return approved
    }
}

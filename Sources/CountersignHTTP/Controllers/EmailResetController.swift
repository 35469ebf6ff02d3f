import CountersignCore
import Foundation
import Hummingbird
import Logging

/// The email reset of the seed app: initiate (a code and a link by mail),
/// verify with the code, or with the link's token from an app that opened
/// the deep link itself.
struct EmailResetController: Sendable {
    let resets: EmailResets
    let abuse: RateLimitGuard

    func addRoutes(to group: RouterGroup<AppRequestContext>) {
        group.post("auth/reset/email/initiate", use: initiate)
        group.post("auth/reset/email/verify", use: verify)
        group.post("auth/reset/email/verify-link", use: verifyLink)
    }

    struct InitiateBody: Decodable { var email: String }

    struct InitiateResponse: ResponseEncodable {
        var success = true
        var message = "If an account exists for this address, a reset code is on its way."
    }

    /// The same answer, after the same work, whether or not the address has an
    /// account: the mail is queued in the outbox, never sent inside the request.
    @Sendable func initiate(_ request: Request, context: AppRequestContext) async throws -> InitiateResponse {
        let body = try await request.decodeJSON(as: InitiateBody.self, context: context)
        let email = User.normalize(email: try Field.email(body.email))
        // Unknown addresses count against the per-email limit exactly like known ones.
        try await abuse.hit(.emailResetPerIP, context.clientKey, RateLimitGuard.Message.resets, context: context, request: request, email: email)
        try await abuse.hit(.emailResetPerEmail, email, RateLimitGuard.Message.resets, context: context, request: request, email: email)
        try await resets.initiate(email: email, context: request.auditContext(context), logger: context.logger)
        return InitiateResponse()
    }

    struct VerifyBody: Decodable {
        var email: String
        var code: String
        var newPassword: String
    }

    struct Success: ResponseEncodable { var success = true }

    @Sendable func verify(_ request: Request, context: AppRequestContext) async throws -> Success {
        let body = try await request.decodeJSON(as: VerifyBody.self, context: context)
        let email = User.normalize(email: try Field.email(body.email))
        let newPassword = try Self.newPassword(body.newPassword)
        let code = body.code.trimmingCharacters(in: .whitespaces)
        guard
            try await Self.redeem(
                .code(email: email, code: code), newPassword: newPassword, resets: resets, abuse: abuse, request: request, context: context)
        else {
            throw APIError.invalidCode
        }
        return Success()
    }

    struct VerifyLinkBody: Decodable {
        var token: String
        var newPassword: String
    }

    @Sendable func verifyLink(_ request: Request, context: AppRequestContext) async throws -> Success {
        let body = try await request.decodeJSON(as: VerifyLinkBody.self, context: context)
        let newPassword = try Self.newPassword(body.newPassword)
        guard
            try await Self.redeem(
                .link(token: body.token), newPassword: newPassword, resets: resets, abuse: abuse, request: request, context: context)
        else {
            throw APIError.invalidCode
        }
        return Success()
    }

    /// Checked before the code is looked at: a weak password does not use a try.
    static func newPassword(_ value: String) throws -> String {
        let password = try Field.password(value, "newPassword")
        if let violation = PasswordPolicy.violation(of: password) { throw APIError.weakPassword(violation) }
        return password
    }
}

extension EmailResetController {
    /// Redeems `proof` as an attempt counted beforehand against the per-address
    /// failure limit (refunded when it succeeds): `false` for every kind of
    /// refusal alike. The JSON routes and the page share it.
    static func redeem(
        _ proof: EmailResets.Proof, newPassword: String, resets: EmailResets, abuse: RateLimitGuard, request: Request, context: AppRequestContext
    ) async throws -> Bool {
        var email: String?
        if case .code(let address, _) = proof { email = address }
        return try await abuse.attempt(
            against: [(.emailVerifyFailuresPerIP, context.clientKey)], RateLimitGuard.Message.resets, context: context, request: request,
            email: email
        ) {
            do {
                try await resets.redeem(proof, newPassword: newPassword, context: request.auditContext(context), logger: context.logger)
                return true
            } catch is InvalidResetCode {
                return false
            }
        }
    }
}

import CountersignCore
import Foundation
import HTTPTypes
import Hummingbird
import Logging

/// The reset link's page, for people who read the mail on a computer:
/// `GET /reset-password?token=…` shows the form (or the expired page, 410),
/// `POST /reset-password` (form-encoded `token`, `password`, `confirm`) sets
/// the password with the same one-time, time-limited, try-limited rules as
/// the code. Every answer is HTML with the contract's security headers; the
/// token is never logged (the access log names the route, not the URI).
struct ResetPageController: Sendable {
    let resets: EmailResets
    let abuse: RateLimitGuard

    func addRoutes(to router: Router<AppRequestContext>) {
        router.get("reset-password", use: show)
        router.post("reset-password", use: submit)
    }

    @Sendable func show(_ request: Request, context: AppRequestContext) async throws -> Response {
        await Self.asPage(context) {
            let token = request.uri.queryParameters["token"].map(String.init) ?? ""
            guard let ticket = try await ticket(token, request: request, context: context) else {
                return Self.html(ResetPages.expired(), status: .gone)
            }
            return Self.html(ResetPages.form(email: ticket.email, token: token))
        }
    }

    /// The ticket of a link's token; a token that opens none counts against
    /// `emailVerifyFailuresPerIP` as a wrong code does (a found one is given back).
    private func ticket(_ token: String, request: Request, context: AppRequestContext) async throws -> EmailResetTicket? {
        var ticket: EmailResetTicket?
        _ = try await abuse.attempt(
            against: [(.emailVerifyFailuresPerIP, context.clientKey)], RateLimitGuard.Message.resets, context: context, request: request
        ) {
            ticket = try await resets.linkTicket(token: token)
            return ticket != nil
        }
        return ticket
    }

    /// Every answer of the page is a page with its headers, faults included (logged, never shown).
    static func asPage(_ context: AppRequestContext, _ body: () async throws -> Response) async -> Response {
        do {
            return try await body()
        } catch let error as APIError {
            return page(for: error)
        } catch is HashingQueueFull {
            context.logger.warning("password hashing queue full: answered 503")
            return page(for: .unavailable)
        } catch {
            context.logger.error("reset page failed", metadata: ["error": "\(String(reflecting: type(of: error)))", "detail": "\(error)"])
            return html(
                ResetPages.problem(title: "Something went wrong", message: "Please try again in a moment."), status: .internalServerError)
        }
    }

    struct Form: Decodable {
        var token: String?
        var password: String?
        var confirm: String?
    }

    @Sendable func submit(_ request: Request, context: AppRequestContext) async throws -> Response {
        await Self.asPage(context) { try await submitForm(request, context: context) }
    }

    func submitForm(_ request: Request, context: AppRequestContext) async throws -> Response {
        let buffer = try await request.readBody(context: context)
        let mediaType = request.headers[.contentType]?.split(separator: ";").first?.trimmingCharacters(in: .whitespaces).lowercased()
        guard mediaType == "application/x-www-form-urlencoded",
            let form = try? URLEncodedFormDecoder().decode(Form.self, from: String(decoding: buffer.readableBytesView, as: UTF8.self))
        else {
            return Self.html(
                ResetPages.problem(title: "Something went wrong", message: "The form could not be read. Open the link from the mail again."),
                status: .badRequest)
        }
        let token = form.token ?? ""
        guard let ticket = try await ticket(token, request: request, context: context) else {
            return Self.html(ResetPages.expired(), status: .gone)
        }
        // Problems with the new password are named on the form; they use no try.
        let password = form.password ?? ""
        if password != (form.confirm ?? "") {
            return Self.html(ResetPages.form(email: ticket.email, token: token, problem: "The two passwords do not match."), status: .badRequest)
        }
        if let violation = PasswordPolicy.violation(of: password) {
            return Self.html(ResetPages.form(email: ticket.email, token: token, problem: violation), status: .badRequest)
        }
        let accepted = try await EmailResetController.redeem(
            .link(token: token), newPassword: password, resets: resets, abuse: abuse, request: request, context: context)
        return accepted ? Self.html(ResetPages.success()) : Self.html(ResetPages.expired(), status: .gone)
    }

    /// An API refusal (429, 413, 503) as a page, with its `Retry-After`.
    static func page(for error: APIError) -> Response {
        var response = html(ResetPages.problem(title: "Please wait", message: error.message), status: error.status)
        if let retryAfter = error.retryAfter { response.headers[.retryAfter] = String(retryAfter) }
        return response
    }

    static func html(_ text: String, status: HTTPResponse.Status = .ok) -> Response {
        var headers = securityHeaders
        headers[.contentType] = "text/html; charset=utf-8"
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(string: text)))
    }

    /// The contract's headers: no script, no framing, no referrer (the token is in the URL), no caching.
    static let securityHeaders: HTTPFields = [
        .contentSecurityPolicy: "default-src 'none'; style-src 'self' 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'",
        .referrerPolicy: "no-referrer",
        .cacheControl: "no-store",
        .xContentTypeOptions: "nosniff",
    ]
}

import CountersignCore
import Foundation
import HTTPTypes
import Hummingbird
import Logging

/// The requester's side of a phone-approved password reset: initiate, status
/// (with long poll), complete, cancel. The request id is the only credential.
struct PhoneResetController: Sendable {
    let broker: ApprovalBroker
    let hasher: any PasswordHasher
    let abuse: RateLimitGuard
    let longPolls: LongPollSlots
    let codes: CodeAnswers
    /// The status answer last encoded, shared by the polls of a request while it stays as it is.
    let lastStatus = LastStatusResponse()

    func addRoutes(to group: RouterGroup<AppRequestContext>) {
        group.post("auth/reset/phone/initiate", use: initiate)
        group.get("auth/reset/phone/status/{requestId}", use: status)
        group.post("auth/reset/phone/complete/{requestId}", use: complete)
        group.post("auth/reset/phone/cancel/{requestId}", use: cancel)
        group.post("auth/reset/phone/verify-code/{requestId}", use: verifyCode)
    }

    struct InitiateBody: Decodable {
        var email: String
        var newPassword: String
    }

    struct InitiateResponse: ResponseEncodable {
        var requestId: String
        var expiresAt: String
        var numberCode: String?
    }

    @Sendable func initiate(_ request: Request, context: AppRequestContext) async throws -> InitiateResponse {
        let body = try await request.decodeJSON(as: InitiateBody.self, context: context)
        let email = User.normalize(email: try Field.email(body.email))
        if let violation = PasswordPolicy.violation(of: body.newPassword) {
            throw APIError.weakPassword(violation)
        }
        try await abuse.hit(.resetInitiatePerIP, context.clientKey, RateLimitGuard.Message.resets, context: context, request: request, email: email)
        try await abuse.hit(.resetInitiatePerEmail, email, RateLimitGuard.Message.resets, context: context, request: request, email: email)
        // Hashed whether or not the account exists: same work, same answer.
        let newPasswordHash = try await hasher.hash(body.newPassword)
        let (approval, code) = try await broker.initiate(
            email: email,
            newPasswordHash: newPasswordHash,
            requester: RequesterInfo(ip: context.clientIP, userAgent: request.userAgent),
            context: request.auditContext(context),
            logger: context.logger
        )
        return InitiateResponse(requestId: approval.id, expiresAt: Timestamp.string(approval.expiresAt), numberCode: code)
    }

    struct StatusResponse: ResponseEncodable {
        var requestId: String
        var status: ApprovalState
        var expiresAt: String
        var errorMessage: String?
        /// How it was answered (`push`, `offline_code`, `bypass_code`); absent until answered.
        var via: AnswerVia?

        init(_ request: ApprovalRequest) {
            requestId = request.id
            status = request.state
            expiresAt = Timestamp.string(request.expiresAt)
            via = request.via
            errorMessage =
                switch request.state {
                case .denied: "The reset request was denied on your trusted device."
                case .expired: "The reset request has expired. Please start again."
                default: nil
                }
        }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(requestId, forKey: .requestId)
            try container.encode(status, forKey: .status)
            try container.encode(expiresAt, forKey: .expiresAt)
            // Always present: null or a sentence.
            try container.encode(errorMessage, forKey: .errorMessage)
            try container.encodeIfPresent(via, forKey: .via)
        }

        /// The most frequent answer of the daemon, written straight into a
        /// buffer: the same bytes as ``APIJSON/encoder`` gives (sorted keys), for
        /// values that need no escaping, which every value of this answer is; any
        /// other falls back to the encoder.
        func response(from request: Request, context: some RequestContext) throws -> Response {
            guard let text = plainJSON else { return try APIJSON.encoder.encode(self, from: request, context: context) }
            let buffer = ByteBuffer(string: text)
            return Response(
                status: .ok,
                headers: [.contentType: "application/json; charset=utf-8", .contentLength: String(buffer.readableBytes)],
                body: .init(byteBuffer: buffer))
        }

        var plainJSON: String? {
            let message = errorMessage.map { "\"\($0)\"" } ?? "null"
            let values = [requestId, status.rawValue, expiresAt, errorMessage ?? ""]
            guard values.allSatisfy(JSONText.needsNoEscaping) else { return nil }
            let answered = via.map { #","via":"\#($0.rawValue)""# } ?? ""
            return #"{"errorMessage":\#(message),"expiresAt":"\#(expiresAt)","requestId":"\#(requestId)","status":"\#(status.rawValue)"\#(answered)}"#
        }

        enum CodingKeys: String, CodingKey { case requestId, status, expiresAt, errorMessage, via }
    }

    @Sendable func status(_ request: Request, context: AppRequestContext) async throws -> Response {
        try await abuse.hit(.statusPollsPerIP, context.clientKey, RateLimitGuard.Message.polls, context: context, request: request)
        let id = try context.parameters.require("requestId")
        let wait = try request.longPollSeconds()
        let poll = StatusLongPoll(broker: broker, slots: longPolls)
        switch try await poll.poll(id, integrationID: nil, seconds: wait, context: context, answer: statusNow(of: id)) {
        case .parked: return LongPollHandOff.parkedResponse()
        case .waited(let found?): return try Self.statusResponse(found, last: lastStatus, request: request, context: context)
        // Gone while waiting: the plain status, as without a wait.
        case .waited(nil), .answerNow:
            return try Self.statusResponse(await broker.status(of: id), last: lastStatus, request: request, context: context)
        }
    }

    /// The status of request `id` as it is when called: the answer of a plain
    /// poll, and of a long poll once its wait is over (not counted again).
    func statusNow(of id: String) -> StatusResponder {
        // What it holds, each parked poll keeps: two references, not the controller.
        { [broker, lastStatus] request, context, woken in
            try Self.statusResponse(await broker.status(of: id, wokenBy: woken), last: lastStatus, request: request, context: context)
        }
    }

    /// The answer for `found`, or not found. Out of line, so that the status
    /// route's async frame (kept by a long poll waiting in it) holds no copy of the request.
    @inline(never)
    static func statusResponse(
        _ found: ApprovalRequest?, last: LastStatusResponse, request: Request, context: AppRequestContext
    ) throws -> Response {
        guard let found else { throw APIError.notFound }
        return try last.response(for: found) { try StatusResponse(found).response(from: request, context: context) }
    }

    struct Success: ResponseEncodable {
        var success = true
        var status: ApprovalState?
    }

    @Sendable func complete(_ request: Request, context: AppRequestContext) async throws -> Success {
        let id = try context.parameters.require("requestId")
        _ = try await request.readBody(context: context)  // optional and ignored, but bounded
        _ = try await broker.complete(id, context: request.auditContext(context), logger: context.logger)
        return Success()
    }

    @Sendable func cancel(_ request: Request, context: AppRequestContext) async throws -> Success {
        let id = try context.parameters.require("requestId")
        _ = try await request.readBody(context: context)
        let cancelled = try await broker.cancel(id, context: request.auditContext(context), logger: context.logger)
        return Success(status: cancelled.state)
    }

    struct CodeBody: Decodable { var code: String }

    struct CodeResponse: ResponseEncodable {
        var requestId: String
        var status: ApprovalState
    }

    /// The requester types the code the user's trusted device shows offline (or a bypass code).
    @Sendable func verifyCode(_ request: Request, context: AppRequestContext) async throws -> CodeResponse {
        let id = try context.parameters.require("requestId")
        let code = try Field.answerCode(try await request.decodeJSON(as: CodeBody.self, context: context).code)
        // Wrong codes here are counted per client address: whoever types at this route is the guesser. A user
        // whose codes are locked gets the wrong code's answer here, as an unknown email does.
        let approved = try await codes.answer(
            code, to: id, integrationID: nil, counted: (.verifyCodePerIP, context.clientKey), abuse: abuse, context: context, request: request)
        return CodeResponse(requestId: approved.id, status: approved.state)
    }
}

import CountersignCore
import Foundation
import HTTPTypes
import Hummingbird

/// A client-facing failure: the status, the stable `error` code of the API
/// contract and a sentence an app can show as is.
public struct APIError: HTTPResponseError, Equatable {
    public var status: HTTPResponse.Status
    public var code: String
    public var message: String
    /// The request's current state, for 409, 410 and 422.
    public var currentState: ApprovalState?
    /// Seconds to wait, for 429: sent both as `Retry-After` and as `retryAfter`.
    public var retryAfter: Int?

    public init(_ status: HTTPResponse.Status, _ code: String, _ message: String, state: ApprovalState? = nil, retryAfter: Int? = nil) {
        self.status = status
        self.code = code
        self.message = message
        self.currentState = state
        self.retryAfter = retryAfter
    }

    public func response(from request: Request, context: some RequestContext) throws -> Response {
        var headers: HTTPFields = [.contentType: "application/json; charset=utf-8"]
        if let retryAfter { headers[.retryAfter] = String(retryAfter) }
        let body = Body(error: code, message: message, status: currentState?.rawValue, retryAfter: retryAfter)
        let data = try APIJSON.encoder.encode(body)
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }

    struct Body: Encodable {
        var success = false
        var error: String
        var message: String
        var status: String?
        var retryAfter: Int?
    }
}

extension APIError {
    static func invalidRequest(_ message: String) -> APIError {
        APIError(.badRequest, "invalid_request", message)
    }
    static func weakPassword(_ message: String) -> APIError {
        APIError(.badRequest, "weak_password", message)
    }
    /// Every refusal of an email reset code or link alike, so the endpoint does not tell which.
    static let invalidCode = APIError(.badRequest, "invalid_code", "That code is not valid. Request a new one.")
    /// Every wrong offline or bypass code alike, so the answer does not tell which was near.
    static let invalidAnswerCode = APIError(.badRequest, "invalid_code", "That code is not valid.")
    static let invalidSignature = APIError(
        .unauthorized, "invalid_signature", "The answer must be signed with this device's key, and this signature is not valid.")
    static let keyRequired = APIError(
        .forbidden, "key_required", "This server accepts only answers signed with a device key. Update the app, then sign in again.")
    static let unauthorized = APIError(.unauthorized, "unauthorized", "A valid API key is required.")
    static let invalidCredentials = APIError(.unauthorized, "invalid_credentials", "Incorrect email or password.")
    static let wrongPassword = APIError(.unauthorized, "invalid_credentials", "Incorrect password.")
    static let notFound = APIError(.notFound, "not_found", "No such request.")
    static let approvalNotFound = APIError(.notFound, "not_found", "No such approval.")
    static let emailUnavailable = APIError(
        .conflict, "email_unavailable", "This email belongs to an account this integration cannot reach. Ask the operator for a grant.")
    static let deviceNotFound = APIError(.notFound, "not_found", "No such device for this user.")
    static let userNotFound = APIError(.notFound, "user_not_found", "No user has this email.")
    static let notEnrolled = APIError(
        .unprocessableContent, "not_enrolled", "This user has no trusted device. Enroll one first (POST /v1/users/{email}/enrollments).")
    static let idempotencyMismatch = APIError(
        .conflict, "idempotency_mismatch", "This Idempotency-Key was already used with a different request.")
    static let integrationUnauthorized = APIError(
        .unauthorized, "unauthorized", "A valid integration API key is required (Authorization: Bearer csk_…).")
    static let invalidEnrollmentCode = APIError(.badRequest, "invalid_code", "That enrollment code is not valid. Ask for a new one.")
    static func tooManyDevices(_ limit: Int) -> APIError {
        APIError(
            .conflict, "too_many_devices",
            "This account already has \(limit) devices, the most allowed. Sign one out first: DELETE /api/mobile/device from that device, "
                + "or ask the operator to run `countersign device revoke`.")
    }
    static let cannotApproveReset = APIError(.forbidden, "forbidden", "This device cannot approve a password reset.")
    static let noWebhook = APIError(.conflict, "no_webhook", "This integration has no webhook. Set its URL first.")
    static let webhookDisabled = APIError(
        .conflict, "webhook_disabled", "The webhook is disabled since its receiver answered 410 Gone. Set its URL again to enable it.")
    static let pingWaiting = APIError(.conflict, "ping_pending", "A test event is still on its way. Wait until its delivery ends.")
    static let eventNotFound = APIError(
        .notFound, "not_found", "No such webhook event of this integration whose delivery has ended.")
    static let routeNotFound = APIError(.notFound, "not_found", "There is nothing at this address.")
    static let methodNotAllowed = APIError(.methodNotAllowed, "invalid_request", "This method is not allowed here.")
    static let payloadTooLarge = APIError(
        .contentTooLarge, "payload_too_large", "The request body is larger than \(APILimits.maxBodyBytes / 1024) KiB.")
    static let unsupportedMediaType = APIError(
        .unsupportedMediaType, "unsupported_media_type", "The request body must be JSON (Content-Type: application/json).")
    static let internalError = APIError(.internalServerError, "internal", "Something went wrong on our side. Please try again.")
    static let unavailable = APIError(
        .serviceUnavailable, "unavailable", "The service is busy right now. Please try again shortly.", retryAfter: 1)

    static func conflict(_ state: ApprovalState) -> APIError {
        APIError(.conflict, "conflict", "The request is \(state.rawValue); this is not possible now.", state: state)
    }
    /// A create with `wait` whose approval did not end approved.
    static func notApproved(_ state: ApprovalState) -> APIError {
        APIError(.forbidden, "not_approved", "The approval ended \(state.rawValue), so the action is refused.", state: state)
    }
    static let expired = APIError(.gone, "expired", "The request has expired. Please start again.", state: .expired)
    static let numberMismatch = APIError(
        .unprocessableContent, "number_mismatch", "The number did not match, so the request was denied.", state: .denied)

    /// Maps the broker's refusals to the contract's statuses.
    static func from(_ error: BrokerError) -> APIError {
        switch error {
        case .notFound: .notFound
        case .refused(.expired): .expired
        case .refused(.conflict(let state)): .conflict(state)
        case .refused(.numberCodeRequired): .invalidRequest("The field `numberCode` is required to approve this request.")
        }
    }
}

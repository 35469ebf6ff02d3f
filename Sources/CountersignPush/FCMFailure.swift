import Foundation

/// Why an FCM call failed, classified as the protocol asks: by the FCM
/// `errorCode` first, then the Google `status`, then the HTTP status.
public struct FCMFailure: Error, Sendable, Equatable, CustomStringConvertible {
    enum Code: Sendable, Equatable {
        case unregistered
        case senderIDMismatch
        case invalidArgument
        case invalidToken
        case thirdPartyAuthError
        case unauthenticated
        case authentication
        case quotaExceeded
        case unavailable
        case internalError
        case other
    }

    let code: Code
    public let httpStatus: Int
    /// FCM's message (never includes our secrets; may name a field).
    public let message: String
    /// Seconds from `Retry-After`, when given.
    public var retryAfter: TimeInterval?

    init(_ code: Code, httpStatus: Int, message: String, retryAfter: TimeInterval? = nil) {
        self.code = code
        self.httpStatus = httpStatus
        self.message = message
        self.retryAfter = retryAfter
    }

    /// Safe for metric labels and logs.
    public var shortDescription: String {
        switch code {
        case .unregistered: "unregistered"
        case .senderIDMismatch: "sender_id_mismatch"
        case .invalidArgument: "invalid_argument"
        case .invalidToken: "invalid_token"
        case .thirdPartyAuthError: "third_party_auth_error"
        case .unauthenticated: "unauthenticated"
        case .authentication: "token_exchange_refused"
        case .quotaExceeded: "quota_exceeded"
        case .unavailable: "unavailable"
        case .internalError: "internal"
        case .other: "http_\(httpStatus)"
        }
    }

    public var description: String { "FCM \(shortDescription) (HTTP \(httpStatus)): \(message)" }

    /// The device's token is dead: stop pushing to it until it sends a new one.
    public var tokenIsDead: Bool { [.unregistered, .senderIDMismatch, .invalidToken].contains(code) }
    /// Worth retrying after a back-off.
    public var isRetryable: Bool { [.quotaExceeded, .unavailable, .internalError].contains(code) }
    /// Our access token was refused: refresh it once and retry once.
    public var needsFreshToken: Bool { code == .unauthenticated }
    /// A configuration fault (APNs credentials, or our service account): no retry, health shows it.
    public var isAuthFault: Bool { code == .thirdPartyAuthError || code == .authentication }

    /// Classifies an FCM error answer. A 502 may come back as HTML: then only the status counts.
    public static func classify(httpStatus: Int, body: Data, retryAfter: TimeInterval?) -> FCMFailure {
        let error = (try? JSONSerialization.jsonObject(with: body) as? [String: Any])?["error"] as? [String: Any]
        let status = error?["status"] as? String
        let message = (error?["message"] as? String).map { String($0.prefix(300)) } ?? "no JSON error body"
        let details = error?["details"] as? [[String: Any]] ?? []
        let errorCode = details.compactMap { $0["errorCode"] as? String }.first
        let fields = details.flatMap { ($0["fieldViolations"] as? [[String: Any]]) ?? [] }.compactMap { $0["field"] as? String }
        let code: Code =
            switch errorCode ?? status {
            case "UNREGISTERED": .unregistered
            case "SENDER_ID_MISMATCH": .senderIDMismatch
            case "INVALID_ARGUMENT":
                // A malformed registration token counts as dead; any other bad field is our fault.
                fields.contains("message.token") || message.localizedCaseInsensitiveContains("registration token")
                    ? .invalidToken : .invalidArgument
            case "THIRD_PARTY_AUTH_ERROR": .thirdPartyAuthError
            case "UNAUTHENTICATED": .unauthenticated
            case "QUOTA_EXCEEDED", "RESOURCE_EXHAUSTED": .quotaExceeded
            case "UNAVAILABLE": .unavailable
            case "INTERNAL": .internalError
            default:
                switch httpStatus {
                case 401: .unauthenticated
                case 404: .unregistered
                case 429: .quotaExceeded
                case 500: .internalError
                case 502, 503, 504: .unavailable
                case 400: .invalidArgument
                default: .other
                }
            }
        let described = fields.isEmpty ? message : message + " (fields: \(fields.joined(separator: ", ")))"
        return FCMFailure(code, httpStatus: httpStatus, message: described, retryAfter: retryAfter)
    }
}

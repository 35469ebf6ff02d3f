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
        /// 403 other than SENDER_ID_MISMATCH: our service account may not send for this project.
        case permissionDenied
        /// 404 other than UNREGISTERED: a wrong project id or endpoint, or a proxy in the way.
        case notFound
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
        case .permissionDenied: "permission_denied"
        case .notFound: "not_found"
        case .authentication: "token_exchange_refused"
        case .quotaExceeded: "quota_exceeded"
        case .unavailable: "unavailable"
        case .internalError: "internal"
        case .other: "http_\(httpStatus)"
        }
    }

    public var description: String { "FCM \(shortDescription) (HTTP \(httpStatus)): \(message)" }

    /// The device's token is dead: stop pushing to it until it sends a new one.
    /// Only FCM's own word for it counts (UNREGISTERED, SENDER_ID_MISMATCH, or
    /// INVALID_ARGUMENT naming the token): a bare 404 or 403 is our configuration.
    public var tokenIsDead: Bool { [.unregistered, .senderIDMismatch, .invalidToken].contains(code) }
    /// Worth retrying after a back-off.
    public var isRetryable: Bool { [.quotaExceeded, .unavailable, .internalError].contains(code) }
    /// Our access token was refused: refresh it once and retry once.
    public var needsFreshToken: Bool { code == .unauthenticated }
    /// A credentials fault (APNs credentials, our service account or its permissions): no retry, health shows it.
    public var isAuthFault: Bool { [.thirdPartyAuthError, .authentication, .permissionDenied].contains(code) }
    /// The send address is wrong (project id, endpoint, a proxy): no retry, nothing disabled, health shows it.
    public var isMisconfiguration: Bool { code == .notFound }

    /// The refusal as every provider's sends sort them.
    var refusal: PushRefusal {
        let kind: PushRefusal.Kind =
            if tokenIsDead { .tokenDead } else if needsFreshToken { .staleCredential } else if isAuthFault { .authFault } else if isMisconfiguration {
                .misconfigured
            } else if isRetryable { .retryable } else { .rejected }
        return PushRefusal(kind, reason: shortDescription, detail: message, hint: hint, retryAfter: retryAfter)
    }

    /// What an operator should check, for the log line of a configuration fault.
    public var hint: String {
        switch code {
        case .notFound: "check project_id in the service account file and --fcm-endpoint (FCM answered 404 without UNREGISTERED)"
        case .permissionDenied: "check that the service account may send with Firebase Cloud Messaging for this project (IAM role)"
        case .thirdPartyAuthError: "check the APNs key or certificate in the Firebase project settings"
        case .authentication, .unauthenticated: "check the service account key: it may have been revoked"
        default: "see the FCM message"
        }
    }

    /// Seconds to wait from a `Retry-After` value: a number of seconds, or an
    /// HTTP date (IMF-fixdate, RFC 9110 §10.2.3) counted from `now`.
    public static func retryAfter(_ value: String?, now: Date) -> TimeInterval? {
        guard let value = value?.trimmingCharacters(in: .whitespaces), !value.isEmpty else { return nil }
        if let seconds = TimeInterval(value), seconds >= 0 { return seconds }
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        guard let date = formatter.date(from: value) else { return nil }
        return max(0, date.timeIntervalSince(now))
    }

    /// Classifies an FCM error answer. A 502 may come back as HTML: then only the status counts.
    public static func classify(httpStatus: Int, body: Data, retryAfter: TimeInterval?) -> FCMFailure {
        let error = (try? JSONSerialization.jsonObject(with: body) as? [String: Any])?["error"] as? [String: Any]
        let status = error?["status"] as? String
        let message = (error?["message"] as? String).map { String($0.prefix(300)) } ?? "no JSON error body"
        let details = error?["details"] as? [[String: Any]] ?? []
        let errorCode = details.compactMap { $0["errorCode"] as? String }.first
        let fields = details.flatMap { ($0["fieldViolations"] as? [[String: Any]]) ?? [] }.compactMap { $0["field"] as? String }
        // FCM's errorCode first, then Google's status; a word this code does
        // not know (FCM's UNSPECIFIED_ERROR, say) gives way to the next one.
        let classified =
            errorCode.flatMap { code(named: $0, message: message, fields: fields) }
            ?? status.flatMap { code(named: $0, message: message, fields: fields) } ?? code(httpStatus: httpStatus)
        let described = fields.isEmpty ? message : message + " (fields: \(fields.joined(separator: ", ")))"
        return FCMFailure(classified, httpStatus: httpStatus, message: described, retryAfter: retryAfter)
    }

    /// The code an FCM `errorCode` or Google `status` names; `nil` for a word not known here.
    private static func code(named word: String, message: String, fields: [String]) -> Code? {
        switch word {
        case "UNREGISTERED": .unregistered
        case "SENDER_ID_MISMATCH": .senderIDMismatch
        case "INVALID_ARGUMENT":
            // A malformed registration token counts as dead; any other bad field is our fault.
            fields.contains("message.token") || message.contains("message.token")
                || message.localizedCaseInsensitiveContains("registration token")
                ? .invalidToken : .invalidArgument
        case "THIRD_PARTY_AUTH_ERROR": .thirdPartyAuthError
        case "UNAUTHENTICATED": .unauthenticated
        case "PERMISSION_DENIED": .permissionDenied
        case "NOT_FOUND": .notFound
        case "QUOTA_EXCEEDED", "RESOURCE_EXHAUSTED": .quotaExceeded
        case "UNAVAILABLE": .unavailable
        case "INTERNAL": .internalError
        default: nil
        }
    }

    /// The code of an answer that names none in words (a 502 may be a proxy's HTML page).
    private static func code(httpStatus: Int) -> Code {
        switch httpStatus {
        case 401: .unauthenticated
        case 403: .permissionDenied
        case 404: .notFound
        case 429: .quotaExceeded
        case 500: .internalError
        case 502, 503, 504: .unavailable
        case 400: .invalidArgument
        default: .other
        }
    }
}

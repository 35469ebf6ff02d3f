import Foundation

/// A limit: at most `count` events per `window` seconds.
public struct RateLimit: Sendable, Equatable {
    public var count: Int
    public var window: TimeInterval

    public init(count: Int, window: TimeInterval) {
        self.count = count
        self.window = window
    }
}

/// The API's limits (contract, "Abuse resistance"), each configurable.
public enum RateLimitName: String, Sendable, CaseIterable {
    case resetInitiatePerEmail
    case resetInitiatePerIP
    case loginFailuresPerEmail
    case loginFailuresPerIP
    case refreshKeyFailuresPerDevice
    case statusPollsPerIP
    case respondPerDevice
    case emailResetPerEmail
    case emailResetPerIP
    case emailVerifyFailuresPerIP
    case approvalsPerUser
    case approvalsPerIntegration
    case enrollFailuresPerIP
    case enrollmentsPerIntegration
    case approvalsPerUserAllIntegrations
    case deviceKeyChangesPerDevice
    case verifyCodePerIP
    /// Wrong codes on `/v1/approvals/{id}/verify-code`, per (integration, user).
    case verifyCodePerUser
    /// Wrong codes of one user across every route and address; kept in the database, cleared by `user unlock`.
    case wrongCodesPerUserPerDay
    /// `POST /v1/users` per integration (each may reveal that an email is taken).
    case userCreatesPerIntegration
    /// `POST /v1/webhook/ping` and `…/redeliver` together, per integration: each makes the daemon post.
    case webhookSendsPerIntegration
    /// `DELETE /v1/users/{email}` per integration (each rewrites the user's audit events).
    case erasuresPerIntegration

    public var defaultLimit: RateLimit {
        switch self {
        case .resetInitiatePerEmail: RateLimit(count: 3, window: 900)
        case .resetInitiatePerIP: RateLimit(count: 10, window: 900)
        case .loginFailuresPerEmail: RateLimit(count: 5, window: 900)
        case .loginFailuresPerIP: RateLimit(count: 5, window: 900)
        case .refreshKeyFailuresPerDevice: RateLimit(count: 5, window: 900)
        case .statusPollsPerIP: RateLimit(count: 50, window: 1)
        case .respondPerDevice: RateLimit(count: 10, window: 60)
        case .emailResetPerEmail: RateLimit(count: 3, window: 3600)
        case .emailResetPerIP: RateLimit(count: 10, window: 3600)
        case .emailVerifyFailuresPerIP: RateLimit(count: 20, window: 3600)
        case .approvalsPerUser: RateLimit(count: 10, window: 60)
        case .approvalsPerIntegration: RateLimit(count: 100, window: 1)
        case .enrollFailuresPerIP: RateLimit(count: 10, window: 900)
        case .enrollmentsPerIntegration: RateLimit(count: 30, window: 600)
        case .approvalsPerUserAllIntegrations: RateLimit(count: 30, window: 60)
        case .deviceKeyChangesPerDevice: RateLimit(count: 5, window: 3600)
        case .verifyCodePerIP: RateLimit(count: 10, window: 900)
        case .verifyCodePerUser: RateLimit(count: 10, window: 900)
        case .wrongCodesPerUserPerDay: RateLimit(count: 30, window: 86400)
        case .userCreatesPerIntegration: RateLimit(count: 60, window: 60)
        case .webhookSendsPerIntegration: RateLimit(count: 60, window: 3600)
        case .erasuresPerIntegration: RateLimit(count: 60, window: 60)
        }
    }
}

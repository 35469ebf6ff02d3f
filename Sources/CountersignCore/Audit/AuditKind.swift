/// What happened, for the audit trail. Raw values are what `countersign audit` shows and filters on.
public enum AuditKind: String, Sendable, CaseIterable, Codable {
    case loginSucceeded = "login_ok"
    case loginFailed = "login_failed"
    case keyRefreshed = "key_refreshed"
    case keyRefreshFailed = "key_refresh_failed"
    case pushTokenUpdated = "push_token_updated"
    case deviceSignedOut = "device_signed_out"
    case requestCreated = "request_created"
    case promptSuppressed = "prompt_suppressed"
    case pushed
    case approved
    case denied
    case numberMismatch = "number_mismatch"
    case completed
    case cancelled
    case expired
    case fraudReported = "fraud_reported"
    case rateLimited = "rate_limited"
    case rateLimitedSummary = "rate_limited_summary"
    case userUnlocked = "user_unlocked"
    case emailResetRequested = "email_reset_requested"
    case resetCodeAccepted = "reset_code_accepted"
    case resetCodeRefused = "reset_code_refused"
    case resetCodeUsedUp = "reset_code_used_up"
    case passwordChanged = "password_changed"
    case mailQueued = "mail_queued"
    case mailSent = "mail_sent"
    case mailRetried = "mail_retried"
    case mailDropped = "mail_dropped"
    case mailFailed = "mail_failed"
    case deviceKeySet = "device_key_set"
    case signatureRefused = "signature_refused"
    case integrationAdded = "integration_added"
    case integrationKeyRotated = "integration_key_rotated"
    case integrationWebhookSet = "integration_webhook_set"
    /// Its receiver answered 410 Gone.
    case integrationWebhookDisabled = "integration_webhook_disabled"
    /// A relying service asked for a test event (`POST /v1/webhook/ping`).
    case webhookPinged = "webhook_pinged"
    case integrationDisabled = "integration_disabled"
    case integrationEnabled = "integration_enabled"
    case userCreated = "user_created"
    /// A user erased, with what was theirs; their earlier events name them by a keyed pseudonym.
    case userErased = "user_erased"
    case integrationDeleted = "integration_deleted"
    case enrollmentIssued = "enrollment_issued"
    case deviceEnrolled = "device_enrolled"
    case enrollmentRefused = "enrollment_refused"
    case deviceRemoved = "device_removed"
    case webhookDelivered = "webhook_delivered"
    case webhookRetried = "webhook_retried"
    case webhookFailed = "webhook_failed"
    case webhookDropped = "webhook_dropped"
    case webhookRedelivered = "webhook_redelivered"
    case deviceAdded = "device_added"
    case deviceRefused = "device_refused"
    case integrationGranted = "integration_granted"
    case integrationGrantRevoked = "integration_grant_revoked"
    case codeRefused = "code_refused"
    case offlineCodeExhausted = "offline_code_exhausted"
    case bypassCodesIssued = "bypass_codes_issued"
    case bypassCodeUsed = "bypass_code_used"
    case bypassCodesRevoked = "bypass_codes_revoked"
    /// A user's wrong codes reached the daily bound: every code is refused until the window ends or `user unlock`.
    case codesLocked = "codes_locked"
    /// A password was set for a user an integration created: it is that integration's no more.
    case ownershipEnded = "ownership_ended"
    /// A login brought the push address a device held: that device was signed out, a new one made.
    case deviceReplaced = "device_replaced"
    /// `POST /v1/users` named an email the integration cannot reach.
    case emailUnavailable = "email_unavailable"
    /// The operator let an integration prompt every user, or took that back.
    case integrationPromptAllUsers = "integration_prompt_all_users"
}

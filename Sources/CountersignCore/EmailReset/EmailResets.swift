import Foundation
import Logging

/// The email reset: issues a code and a link for an address, queues the mail
/// in the same transaction, and sets a new password for the one caller that
/// proves either, once. The store's conditional updates decide every race.
public struct EmailResets: Sendable {
    /// How a caller proves it read the mail.
    public enum Proof: Sendable {
        case code(email: String, code: String)
        case link(token: String)

        /// The path named in the audit trail.
        var path: String {
            switch self {
            case .code: "email code"
            case .link: "email link"
            }
        }
    }

    let store: any EmailResetStore
    let accounts: any ApproverDirectory & PushTargetStore
    let keys: SecretKeys
    let hasher: any PasswordHasher
    let audit: AuditLog
    let bell: OutboxBell
    public let configuration: EmailResetConfiguration
    let now: @Sendable () -> Date
    /// Told of the phone resets a password change cancelled (the broker: it wakes their polls and tells the devices).
    let onCancelledResets: @Sendable (_ userID: String, [CancelledReset], Date, Logger) async -> Void

    public init(
        store: any EmailResetStore,
        accounts: any ApproverDirectory & PushTargetStore,
        keys: SecretKeys,
        hasher: any PasswordHasher,
        audit: AuditLog,
        bell: OutboxBell,
        configuration: EmailResetConfiguration,
        now: @escaping @Sendable () -> Date = { Date() },
        onCancelledResets: @escaping @Sendable (_ userID: String, [CancelledReset], Date, Logger) async -> Void = { _, _, _, _ in }
    ) {
        self.onCancelledResets = onCancelledResets
        self.store = store
        self.accounts = accounts
        self.keys = keys
        self.hasher = hasher
        self.audit = audit
        self.bell = bell
        self.configuration = configuration
        self.now = now
    }

    /// Issues a new code and link for `email` (normalized), voiding earlier
    /// ones, and queues the mail when the address has an account and mail is
    /// configured. An unknown address gets a ticket too (nothing is sent for
    /// it), so both cases do the same work and the caller answers the same.
    public func initiate(email: String, context: AuditContext, logger: Logger) async throws {
        let user = try await accounts.user(email: email)
        let now = now()
        let id = SecureToken.recordID()
        let code = ResetCode.generate()
        let token = SecureToken.apiKey()
        let ticket = EmailResetTicket(
            id: id, userID: user?.id, email: email, codeHash: keys.hash(code, context: id), tokenHash: keys.hash(token, context: "link"),
            createdAt: now, expiresAt: now.addingTimeInterval(configuration.codeTTL))
        var mail: OutboxItem?
        if let user, configuration.mailEnabled {
            // The mail names the devices that stay signed in after a reset (names only).
            let devices = try await accounts.devices(userID: user.id).map(\.name)
            let payload = ResetMailPayload(to: user.email, code: code, token: token, expiresAt: ticket.expiresAt, devices: devices)
            mail = OutboxItem(
                id: SecureToken.recordID(), kind: .mail, reference: id, userID: user.id,
                payload: try keys.seal(JSONEncoder().encode(payload)), createdAt: now, nextAttemptAt: now, deadline: ticket.expiresAt)
        }
        let (replaced, dropped) = try await store.issueEmailReset(ticket, mail: mail)
        for id in dropped {
            audit.record(
                AuditEvent(at: now, kind: .mailDropped, userID: user?.id, requestRef: id, context: context, detail: "replaced by a newer code"))
        }
        var detail = user == nil ? "unknown email: nothing sent" : (mail == nil ? "mail is not configured: nothing sent" : "code and link issued")
        if replaced > 0 { detail += "; \(replaced) earlier code(s) voided" }
        audit.record(AuditEvent(at: now, kind: .emailResetRequested, userID: user?.id, email: email, context: context, detail: detail))
        logger.info("email reset requested", metadata: ["ticket": "\(id)", "mail": "\(mail != nil)"])
        if let mail {
            audit.record(AuditEvent(at: now, kind: .mailQueued, userID: user?.id, requestRef: mail.id, context: context, detail: "password reset"))
            bell.ring()
        }
    }

    /// Whether a link token still opens a form (the page's first view), and for which address.
    public func linkTicket(token: String) async throws -> EmailResetTicket? {
        guard SecureToken.isWellFormed(token),
            let ticket = try await store.emailReset(tokenHash: keys.hash(token, context: "link")),
            ticket.userID != nil, ticket.refusal(at: now(), maxTries: configuration.maxTries) == nil
        else { return nil }
        return ticket
    }

    /// Sets `newPassword` (already checked against the password rules) for the
    /// account the proof opens, and uses its code and link up; returns the user id.
    ///
    /// Each try is counted on the ticket before the code is compared, so that
    /// parallel guesses cannot get more than ``EmailResetConfiguration/maxTries``
    /// comparisons. A right code still has to win the conditional update that
    /// uses the ticket up: of many concurrent right answers, one sets the password.
    ///
    /// - Throws: ``InvalidResetCode`` for every kind of refusal alike.
    @discardableResult
    public func redeem(_ proof: Proof, newPassword: String, context: AuditContext, logger: Logger) async throws -> String {
        let now = now()
        let ticket: EmailResetTicket?
        switch proof {
        case .code(let email, let code):
            ticket = ResetCode.isWellFormed(code) ? try await store.activeEmailReset(email: email) : nil
        case .link(let token):
            ticket = SecureToken.isWellFormed(token) ? try await store.emailReset(tokenHash: keys.hash(token, context: "link")) : nil
        }
        guard let ticket else {
            throw refuse(nil, proof, "no such code or link", context: context, logger: logger)
        }
        if let reason = ticket.refusal(at: now, maxTries: configuration.maxTries) {
            throw refuse(ticket, proof, reason, context: context, logger: logger)
        }
        guard let attempt = try await store.takeEmailResetTry(id: ticket.id, maxTries: configuration.maxTries, now: now) else {
            throw refuse(ticket, proof, "no tries left, or expired meanwhile", context: context, logger: logger)
        }
        var matches = true
        if case .code(_, let code) = proof { matches = keys.matches(code, context: ticket.id, stored: ticket.codeHash) }
        guard let userID = ticket.userID else {
            throw refuse(ticket, proof, "no account for this address", context: context, logger: logger)
        }
        if !matches {
            let error = refuse(ticket, proof, "wrong code (try \(attempt) of \(configuration.maxTries))", context: context, logger: logger)
            if attempt >= configuration.maxTries {
                audit.record(
                    AuditEvent(
                        at: now, kind: .resetCodeUsedUp, userID: userID, email: ticket.email, context: context,
                        detail: "\(configuration.maxTries) tries"))
            }
            throw error
        }
        let passwordHash: String
        do {
            passwordHash = try await hasher.hash(newPassword)
        } catch {
            try await store.returnEmailResetTry(id: ticket.id)
            throw error
        }
        let changedAt = self.now()
        guard let cancelled = try await store.redeemEmailReset(id: ticket.id, passwordHash: passwordHash, now: changedAt) else {
            throw refuse(ticket, proof, "already used by a concurrent request", context: context, logger: logger)
        }
        if !cancelled.isEmpty { await onCancelledResets(userID, cancelled, changedAt, logger) }
        audit.record(AuditEvent(at: now, kind: .resetCodeAccepted, userID: userID, email: ticket.email, context: context, detail: proof.path))
        audit.record(AuditEvent(at: now, kind: .passwordChanged, userID: userID, context: context, detail: proof.path))
        logger.notice("password changed by email reset", metadata: ["user": "\(userID)", "path": "\(proof.path)"])
        return userID
    }

    private func refuse(
        _ ticket: EmailResetTicket?, _ proof: Proof, _ reason: String, context: AuditContext, logger: Logger
    ) -> InvalidResetCode {
        var email = ticket?.email
        if email == nil, case .code(let address, _) = proof { email = address }
        audit.record(
            AuditEvent(kind: .resetCodeRefused, userID: ticket?.userID, email: email, context: context, detail: "\(proof.path): \(reason)"))
        logger.notice("reset code refused", metadata: ["path": "\(proof.path)", "reason": "\(reason)"])
        return InvalidResetCode(reason)
    }
}

import Foundation
import Logging

/// Answers a pending request with a code the requester typed where it would
/// otherwise wait for the phone: a trusted device's offline code (TOTP) or an
/// operator's bypass code. A right code approves through the broker, as a
/// device's answer would (one winner against a concurrent answer, audit,
/// webhook, long polls); the ``wrongCodesAllowed``-th wrong code on one
/// request denies it.
public struct CodeAnswers: Sendable {
    let broker: ApprovalBroker
    let store: any OfflineCodeStore
    let secrets: OfflineSecrets
    let deviceKeys: DeviceKeyPolicy
    let audit: AuditLog
    let now: @Sendable () -> Date

    /// Wrong codes one request takes; the last of them denies it.
    public static let wrongCodesAllowed = 5

    public init(
        broker: ApprovalBroker, store: any OfflineCodeStore, secrets: OfflineSecrets, deviceKeys: DeviceKeyPolicy, audit: AuditLog,
        now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.broker = broker
        self.store = store
        self.secrets = secrets
        self.deviceKeys = deviceKeys
        self.audit = audit
        self.now = now
    }

    public enum Outcome: Sendable, Equatable {
        case approved(ApprovalRequest)
        /// No code of this request's user matched (or it was used before): counted against the request.
        case wrong
    }

    /// Checks `code` against request `id` of `integrationID` (`nil`: a phone
    /// reset). Throws ``BrokerError`` as any answer does: not found, expired,
    /// or no longer pending (nothing is counted or spent then).
    ///
    /// Each check takes one of the request's tries first, in the database:
    /// however many guesses arrive at once, at most ``wrongCodesAllowed`` are
    /// ever checked, and the one that takes the last try denies the request if
    /// it is wrong.
    public func answer(
        _ code: AnswerCode, to id: String, integrationID: String?, context: AuditContext, logger: Logger
    ) async throws -> Outcome {
        guard let request = try await broker.status(of: id, integrationID: integrationID) else { throw BrokerError.notFound }
        switch request.state {
        case .pending: break
        case .expired: throw BrokerError.refused(.expired)
        default: throw BrokerError.refused(.conflict(request.state))
        }
        guard let attempt = try await store.takeCodeTry(requestID: id, limit: Self.wrongCodesAllowed) else {
            // No try left (or no longer pending): this code is not looked at. The last
            // try's denial is written now if it has not been; the answer is the state.
            try await deny(id, integrationID: integrationID, context: context, logger: logger)
            let state = try await broker.status(of: id, integrationID: integrationID)?.state ?? .denied
            throw BrokerError.refused(state == .expired ? .expired : .conflict(state))
        }
        if let match = try await match(code, for: request, logger: logger) {
            var context = context
            context.deviceID = match.deviceID
            do {
                let approved = try await broker.approve(
                    byCode: id, integrationID: integrationID, via: match.via, deviceID: match.deviceID, context: context, logger: logger)
                if match.via == .bypassCode, let userID = request.userID {
                    audit.record(
                        AuditEvent(
                            at: now(), kind: .bypassCodeUsed, userID: userID, requestRef: request.logReference, context: context,
                            detail: request.prompt.map { "integration \($0.integrationName)" } ?? "password reset"))
                }
                return .approved(approved)
            } catch let refusal as BrokerError {
                // Another answer won: a bypass code stays unused (an offline code's step is spent, as the code was shown).
                if let bypass = match.bypass { try await store.restoreBypassCode(userID: bypass.userID, codeHash: bypass.hash, usedAt: bypass.at) }
                throw refusal
            }
        }
        logger.notice("wrong code for a request", metadata: ["request": "\(request.logReference)", "try": "\(attempt)"])
        audit.record(
            AuditEvent(
                at: now(), kind: .codeRefused, userID: request.recipient.accountID, requestRef: request.logReference, context: context,
                detail: "wrong code \(attempt) of \(Self.wrongCodesAllowed)"))
        if attempt >= Self.wrongCodesAllowed {
            try await deny(id, integrationID: integrationID, context: context, logger: logger)
        }
        return .wrong
    }

    /// Denies a request that took its last wrong code.
    private func deny(_ id: String, integrationID: String?, context: AuditContext, logger: Logger) async throws {
        do {
            try await broker.denyAfterWrongCodes(id, integrationID: integrationID, context: context, logger: logger)
        } catch BrokerError.refused {
            // Answered, cancelled, expired or denied meanwhile: nothing left to deny.
        }
    }

    struct Match {
        var via: AnswerVia
        var deviceID: String?
        /// The bypass code used, to give back if the approval loses.
        var bypass: (userID: String, hash: String, at: Date)?
    }

    /// The device (or bypass code) `code` is from, spent; `nil` when it is of no one who may answer `request`.
    /// A request no one may answer (an unknown email, a user silenced by a fraud report) costs the
    /// same lookups, under a user id no row has, so that its answer takes as long.
    private func match(_ code: AnswerCode, for request: ApprovalRequest, logger: Logger) async throws -> Match? {
        let userID = request.userID ?? "nobody:" + request.subject
        switch code {
        case .offline(let typed):
            guard secrets.enabled else { return nil }
            let devices = try await store.devices(userID: userID).filter { Self.mayAnswer($0, request, deviceKeys: deviceKeys) }
            let current = TOTP.step(at: now())
            // Every device and every accepted step is computed and compared, whatever
            // matched first: the time taken does not tell which device's code was near.
            var found: (device: Device, sealed: Data, step: Int64)?
            for device in devices {
                guard let sealed = device.offlineSecret, let secret = secrets.open(sealed) else { continue }
                for step in (current - 1)...(current + 1) {
                    let same = TOTP.sameCode(TOTP.code(secret: secret, step: step), typed)
                    if same && found == nil { found = (device, sealed, step) }
                }
            }
            guard let found, request.userID != nil,
                try await store.useOfflineStep(
                    deviceID: found.device.id, step: found.step, sealed: found.sealed, resetRight: request.action == .passwordReset)
            else { return nil }
            return Match(via: .offlineCode, deviceID: found.device.id)
        case .bypass(let digits):
            let hash = BypassCode.hash(digits, userID: userID, keys: secrets.keys)
            let at = now()
            guard try await store.useBypassCode(userID: userID, codeHash: hash, passwordReset: request.action == .passwordReset, now: at),
                request.userID != nil
            else { return nil }
            logger.notice("bypass code used", metadata: ["user": "\(userID)", "request": "\(request.logReference)"])
            return Match(via: .bypassCode, deviceID: nil, bypass: (userID, hash, at))
        }
    }

    /// Whether `device`'s offline code may answer `request` (trust.md): a
    /// password reset only from a device the user signed in on with the
    /// password; with device keys required, only from a key-bound device.
    static func mayAnswer(_ device: Device, _ request: ApprovalRequest, deviceKeys: DeviceKeyPolicy) -> Bool {
        if request.action == .passwordReset && !device.mayApproveResets { return false }
        if deviceKeys == .required && device.publicKey == nil { return false }
        return true
    }
}

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
    public func answer(
        _ code: AnswerCode, to id: String, integrationID: String?, context: AuditContext, logger: Logger
    ) async throws -> Outcome {
        guard let request = try await broker.status(of: id, integrationID: integrationID) else { throw BrokerError.notFound }
        switch request.state {
        case .pending: break
        case .expired: throw BrokerError.refused(.expired)
        default: throw BrokerError.refused(.conflict(request.state))
        }
        if let match = try await match(code, for: request, context: context, logger: logger) {
            var context = context
            context.deviceID = match.deviceID
            let approved = try await broker.approve(
                byCode: id, integrationID: integrationID, via: match.via, deviceID: match.deviceID, context: context, logger: logger)
            return .approved(approved)
        }
        let wrong = try await store.countWrongCode(requestID: id)
        logger.notice("wrong code for a request", metadata: ["request": "\(request.logReference)", "wrong": "\(wrong)"])
        audit.record(
            AuditEvent(
                at: now(), kind: .codeRefused, userID: request.recipient.accountID, requestRef: request.logReference, context: context,
                detail: "wrong code \(wrong) of \(Self.wrongCodesAllowed)"))
        if wrong >= Self.wrongCodesAllowed {
            do {
                try await broker.denyAfterWrongCodes(id, integrationID: integrationID, context: context, logger: logger)
            } catch BrokerError.refused {
                // Answered, cancelled or expired meanwhile: nothing left to deny.
            }
        }
        return .wrong
    }

    struct Match {
        var via: AnswerVia
        var deviceID: String?
    }

    private func match(_ code: AnswerCode, for request: ApprovalRequest, context: AuditContext, logger: Logger) async throws -> Match? {
        // A request for an unknown email, or made while a fraud report silenced the user, has no one to answer it.
        guard let userID = request.userID else { return nil }
        switch code {
        case .offline(let typed):
            guard secrets.enabled else { return nil }
            let devices = try await store.devices(userID: userID).filter { Self.mayAnswer($0, request, deviceKeys: deviceKeys) }
            let current = TOTP.step(at: now())
            // Every device and every accepted step is computed and compared, whatever
            // matched first: the time taken does not tell which device's code was near.
            var found: (deviceID: String, step: Int64)?
            for device in devices {
                guard let sealed = device.offlineSecret, let secret = secrets.open(sealed) else { continue }
                for step in (current - 1)...(current + 1) {
                    let same = TOTP.sameCode(TOTP.code(secret: secret, step: step), typed)
                    if same && found == nil { found = (device.id, step) }
                }
            }
            guard let found, try await store.useOfflineStep(deviceID: found.deviceID, step: found.step) else { return nil }
            return Match(via: .offlineCode, deviceID: found.deviceID)
        case .bypass(let digits):
            let hash = BypassCode.hash(digits, userID: userID, keys: secrets.keys)
            guard try await store.useBypassCode(userID: userID, codeHash: hash, passwordReset: request.action == .passwordReset, now: now())
            else { return nil }
            logger.notice("bypass code used", metadata: ["user": "\(userID)", "request": "\(request.logReference)"])
            audit.record(
                AuditEvent(
                    at: now(), kind: .bypassCodeUsed, userID: userID, requestRef: request.logReference, context: context,
                    detail: request.prompt.map { "integration \($0.integrationName)" } ?? "password reset"))
            return Match(via: .bypassCode, deviceID: nil)
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

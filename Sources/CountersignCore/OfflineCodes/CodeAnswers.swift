import CountersignWire
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
    /// Wrong codes a user may type across every route and address (`wrongCodesPerUserPerDay`).
    let userBound: RateLimit
    /// Where the user's devices are told that their codes are locked; `nil`: nobody is told.
    let pushQueue: PushQueue?
    let now: @Sendable () -> Date

    /// Wrong codes one request takes; the last of them denies it.
    public static let wrongCodesAllowed = 5

    public init(
        broker: ApprovalBroker, store: any OfflineCodeStore, secrets: OfflineSecrets, deviceKeys: DeviceKeyPolicy, audit: AuditLog,
        userBound: RateLimit = RateLimitName.wrongCodesPerUserPerDay.defaultLimit, pushQueue: PushQueue? = nil,
        now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.broker = broker
        self.store = store
        self.secrets = secrets
        self.deviceKeys = deviceKeys
        self.audit = audit
        self.userBound = userBound
        self.pushQueue = pushQueue
        self.now = now
    }

    /// The user typed as many wrong codes as the day allows: every code for them is
    /// refused until `until`, or until the operator runs `countersign user unlock`.
    public struct Locked: Error, Equatable {
        public var until: Date
    }

    /// The request whose code is typed, as it is before the code is looked at: who it is for.
    private func request(_ id: String, integrationID: String?) async throws -> ApprovalRequest {
        guard let request = try await broker.status(of: id, integrationID: integrationID) else { throw BrokerError.notFound }
        return request
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
    ///
    /// Before any of that, the try is counted against the user's bound across
    /// routes (``userBound``): a user who used it up is ``Locked``, whatever the
    /// code; a right code (or one never checked) gives its try back, and the
    /// wrong code that uses the bound up tells the user's devices, once.
    public func answer(
        _ code: AnswerCode, to id: String, integrationID: String?, context: AuditContext, logger: Logger
    ) async throws -> Outcome {
        let request = try await request(id, integrationID: integrationID)
        guard let userID = request.userID else {
            return try await answer(code, to: request, integrationID: integrationID, context: context, logger: logger)
        }
        let (taken, windowStart): (Int, Date)
        switch try await store.takeUserCodeTry(userID: userID, limit: userBound.count, window: userBound.window, now: now()) {
        case .taken(let count, let start): (taken, windowStart) = (count, start)
        case .locked(let until):
            logger.notice("code refused: the user's codes are locked", metadata: ["request": "\(request.logReference)"])
            // On the phone-reset route, which anyone may call, a locked user's code is a wrong code like any
            // other (the request's try is taken, the 5th denies): a lock must not tell that an account exists.
            guard integrationID != nil else {
                return try await answer(code, to: request, integrationID: integrationID, context: context, logger: logger, checked: false)
            }
            throw Locked(until: until)
        case .noUser:
            return try await answer(code, to: request, integrationID: integrationID, context: context, logger: logger)
        }
        let outcome: Outcome
        do {
            outcome = try await answer(code, to: request, integrationID: integrationID, context: context, logger: logger)
        } catch let refusal as BrokerError {
            // Refused before the code was looked at (no longer pending, no try left): not a guess.
            try? await store.giveBackUserCodeTry(userID: userID, windowStart: windowStart)
            throw refusal
        }
        switch outcome {
        case .approved: try await store.giveBackUserCodeTry(userID: userID, windowStart: windowStart)
        case .wrong where taken == userBound.count: lockedNow(userID: userID, request: request, context: context, logger: logger)
        case .wrong: break
        }
        return outcome
    }

    /// The wrong code that used up the user's bound: audited, and the user's devices told (once per window).
    private func lockedNow(userID: String, request: ApprovalRequest, context: AuditContext, logger: Logger) {
        logger.warning("a user's codes are locked: too many wrong codes", metadata: ["user": "\(userID)"])
        audit.record(
            AuditEvent(
                at: now(), kind: .codesLocked, userID: userID, requestRef: request.logReference, context: context,
                detail: "\(userBound.count) wrong codes in \(Int(userBound.window)) s; `countersign user unlock` ends it"))
        if pushQueue?.enqueue(.codesLocked(userID: userID)) != nil {
            logger.warning("push queue full: dropped the oldest notice")
        }
    }

    /// `checked: false`: the code is refused unseen (its user's codes are locked), as a wrong one is.
    private func answer(
        _ code: AnswerCode, to request: ApprovalRequest, integrationID: String?, context: AuditContext, logger: Logger, checked: Bool = true
    ) async throws -> Outcome {
        let id = request.id
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
        if checked, let match = try await match(code, for: request, logger: logger) {
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
            // A code a user types into relying services' pages never approves a password reset (trust.md).
            guard secrets.enabled, request.action != .passwordReset else { return nil }
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

import Foundation
import Logging

/// Owns the live approval requests: applies the decisions of
/// ``ApprovalStateMachine``, persists them, wakes long-poll waiters and hands
/// pushes to the ``PushQueue``. Every decision about a request is made here or
/// in the machine, on the broker's clock; callers only translate the outcome.
///
/// The database is the arbiter of races: each transition is a conditional
/// update that changes one row or none. The actor's own state (the index of
/// live requests and the waiters) only mirrors what the database accepted, so
/// actor re-entrancy at an `await` cannot make two callers both win.
///
/// On a database shared by a cluster (``ApprovalStore/isShared``), other nodes
/// change requests too: the broker keeps no index then and reads every request
/// from the database, and learns of other nodes' transitions through
/// ``changed(_:)`` (and ``recheckAll()`` after a notification gap) to wake its long polls.
public actor ApprovalBroker {
    let store: any ApprovalStore
    private let approvers: any ApproverDirectory
    private let configuration: BrokerConfiguration
    private let pushQueue: PushQueue
    private let audit: AuditLog
    private let logger: Logger
    /// Rung after a transition queued a webhook event.
    private let outboxBell: OutboxBell?
    let now: @Sendable () -> Date
    private let observer: @Sendable (Transition) -> Void

    /// The live requests: held in memory, or read through on a shared database.
    let live: LiveRequests
    /// The long polls parked here, with their timeouts (see `ApprovalBroker+LongPoll.swift`).
    var polls = LongPollWaiters<LongPollWaiter>()
    /// The one task that sleeps until the soonest timeout.
    var timeoutTimer: (task: Task<Void, Never>, at: ContinuousClock.Instant)?
    /// Set on shutdown: every long poll is answered at once.
    var draining = false
    /// On a shared database, the requests whose read after a parking is under
    /// way (see `recheckAfterParking`).
    var rechecksAfterParking: [String: RecheckAfterParking] = [:]
    /// Reads after parking started so far (each loop's number).
    var rechecksStarted = 0
    /// On a shared database, the requests another node changed whose waiters
    /// wait for the one read they share (see `changed(_:)`): the number of that read.
    var readsForWaiters: [String: Int] = [:]
    /// Reads for waiters started so far.
    var readsForWaitersStarted = 0
    /// When the expiry sweep last completed: the watchdog's sign of life.
    public private(set) var lastSweep: Date?

    public init(
        store: any ApprovalStore,
        approvers: any ApproverDirectory,
        configuration: BrokerConfiguration,
        pushQueue: PushQueue,
        audit: AuditLog,
        logger: Logger,
        outboxBell: OutboxBell? = nil,
        now: @escaping @Sendable () -> Date = { Date() },
        observer: @escaping @Sendable (Transition) -> Void = { _ in },
        readPatience: Duration = .milliseconds(250)
    ) {
        self.store = store
        self.live = LiveRequests(store: store, patience: readPatience)
        self.approvers = approvers
        self.configuration = configuration
        self.pushQueue = pushQueue
        self.audit = audit
        self.logger = logger
        self.outboxBell = outboxBell
        self.now = now
        self.observer = observer
    }

    // MARK: Start-up and sweeping

    /// Loads the live requests from the database and expires the overdue ones.
    public func start() async throws {
        if let loaded = try await live.load() {
            logger.info("approval index loaded", metadata: ["live": "\(loaded)"])
        }
        try await expireDue()
    }

    /// Writes `expired` for every live request whose deadline has passed and
    /// wakes its waiters. On a shared database every node sweeps; the
    /// conditional update lets one of them expire each request.
    public func expireDue() async throws {
        let now = now()
        for request in try await live.due(at: now) {
            var machine = ApprovalStateMachine(request)
            guard let transition = machine.expireIfDue(at: now) else { continue }
            try await commit(transition, machine.request, context: .system, logger: logger)
        }
        lastSweep = now
    }

    /// Counts of live requests by state, for status lines and metrics.
    public func liveCounts() async -> [ApprovalState: Int] {
        do {
            return try await live.counts()
        } catch {
            logger.warning("cannot count live requests", metadata: ["error": "\(error)"])
            return [:]
        }
    }

    // MARK: Requester side

    /// Starts a request for whoever `email` belongs to. An unknown email, or a
    /// user whose prompts a fraud report silenced, gets a request that looks
    /// the same from outside but prompts no device and expires unanswered.
    public func initiate(
        email: String,
        action: ApprovalAction = .passwordReset,
        newPasswordHash: String,
        requester: RequesterInfo,
        context: AuditContext = .system,
        logger requestLogger: Logger? = nil
    ) async throws -> (request: ApprovalRequest, numberCode: String?) {
        let logger = requestLogger ?? self.logger
        let recipient = try await recipient(forEmail: email, context: context, logger: logger)
        let draft = draft()
        return (
            try await initiate(
                for: recipient, action: action, newPasswordHash: newPasswordHash, requester: requester, draft: draft, context: context,
                logger: logger),
            draft.numberCode
        )
    }

    /// A request's identity before it exists: its id, its number code (when
    /// matching is on) and its times, on the broker's clock. A caller that must
    /// answer for the request inside its insert (an idempotent create stores
    /// its first answer there) makes the draft first.
    ///
    /// - Parameters:
    ///   - ttl: how long it stays pending; by default the configured request TTL.
    ///   - numberMatching: by default the configured setting.
    public nonisolated func draft(ttl: TimeInterval? = nil, numberMatching: Bool? = nil) -> ApprovalDraft {
        let now = now()
        return ApprovalDraft(
            id: SecureToken.requestID(), numberCode: (numberMatching ?? configuration.numberMatching) ? NumberCode.generate() : nil,
            createdAt: now, expiresAt: now.addingTimeInterval(ttl ?? configuration.requestTTL))
    }

    /// Decides whom a request for `email` is for, on the broker's clock.
    private func recipient(forEmail email: String, context: AuditContext, logger: Logger) async throws -> Recipient {
        let email = User.normalize(email: email)
        guard let user = try await approvers.user(email: email) else {
            return .unknownEmail(emailHash: SecureToken.sha256Hex(email))
        }
        return recipient(for: user, context: context, logger: logger)
    }

    /// Whom a request for a known user is for: the user, or, while a fraud
    /// report silences their prompts, a recipient no device hears (audited).
    private func recipient(for user: User, context: AuditContext, logger: Logger) -> Recipient {
        guard user.isSilenced(at: now()) else { return .user(id: user.id) }
        logger.notice("prompts silenced after a fraud report", metadata: ["user": "\(user.id)"])
        audit.record(
            AuditEvent(
                at: now(), kind: .promptSuppressed, userID: user.id, context: context,
                detail: "fraud report until \(Timestamp.string(user.silencedUntil ?? now()))"))
        return .silenced(userID: user.id)
    }

    /// Starts the request `draft` describes for `recipient`, replacing
    /// (cancelling) its pending one of the same action (and integration).
    ///
    /// - Parameters:
    ///   - newPasswordHash: for a password reset, what completing it sets.
    ///   - prompt: what an integration asks to show; `nil` for the phone reset.
    ///   - draft: its id, number code and times (``draft(ttl:numberMatching:)``).
    ///   - idempotency: the first answer under an integration's key, stored in
    ///     the insert's transaction; a key already taken throws ``IdempotencyKeyTaken``.
    ///   - prompting: `false` when a code typed with the create answers it: no push is sent.
    public func initiate(
        for recipient: Recipient,
        action: ApprovalAction = .passwordReset,
        newPasswordHash: String?,
        requester: RequesterInfo,
        prompt: ApprovalPrompt? = nil,
        draft: ApprovalDraft,
        idempotency record: IdempotencyRecord? = nil,
        prompting: Bool = true,
        context: AuditContext = .system,
        logger requestLogger: Logger? = nil
    ) async throws -> ApprovalRequest {
        let logger = requestLogger ?? self.logger
        let now = draft.createdAt
        let request = ApprovalRequest(
            id: draft.id,
            userID: recipient.approverID,
            subject: recipient.subject,
            action: action,
            state: .pending,
            createdAt: now,
            expiresAt: draft.expiresAt,
            completionWindow: configuration.completionWindow,
            updatedAt: now,
            numberCode: draft.numberCode.map(NumberCode.seal),
            newPasswordHash: newPasswordHash,
            requester: requester,
            prompt: prompt
        )
        // The insert cancelled the subject's pending request in its transaction (the
        // store decides each cancellation once and returns it): its side effects are
        // owed here, even if a racing answer on it already lost and dropped it from the index.
        let superseded = try await store.insert(request, idempotency: record) { WebhookEvent.outboxItem(for: $0.request, after: $0.transition) }
        live.mirror(request)
        for cancelled in superseded {
            didCommit(cancelled.transition, cancelled.request, context: context, logger: logger)
        }
        logger.info("approval request created", metadata: ["request": "\(request.logReference)", "prompt": "\(recipient.approverID != nil)"])
        var details: [String] = []
        if let prompt { details.append("integration \(prompt.integrationName), action \(action.rawValue)") }
        switch recipient {
        case .user: break
        case .silenced: details.append("prompts silenced")
        case .unknownEmail: details.append("unknown email")
        }
        audit.record(
            AuditEvent(
                at: now, kind: .requestCreated, userID: recipient.accountID, requestRef: request.logReference, context: context,
                detail: details.isEmpty ? nil : details.joined(separator: "; ")))
        if prompting, let userID = recipient.approverID {
            push(
                .prompt(requestID: request.id, userID: userID, action: action, expiresAt: request.expiresAt, requester: requester, prompt: prompt),
                logger: logger)
        }
        return request
    }

    /// A requester's request as a reader must see it now (a live request past
    /// its deadline reads `expired`): an integration's own (`integrationID`),
    /// or with `nil` a phone reset's. Anyone else's is `nil`.
    /// Not on the actor: a read waits for no transition, sweep or wake-up.
    ///
    /// The work on the request is in synchronous functions: a waiting long
    /// poll keeps the largest async frames its task ever held (a task's
    /// allocator keeps its slabs until the task ends), and each copy of a
    /// request held across an `await` is a few hundred bytes of them.
    nonisolated public func status(of id: String, integrationID: String? = nil) async throws -> ApprovalRequest? {
        asSeenNow(try await load(id), ifMadeBy: integrationID)
    }

    /// The status a long poll answers with once `woken` ended its wait: the
    /// request as read or committed once for all its waiters
    /// (``LongPollWake/read(_:)``), else as read now (``status(of:integrationID:)``).
    /// Either way as a reader sees it now, and only the requester's own.
    nonisolated public func status(of id: String, integrationID: String? = nil, wokenBy woken: LongPollWake?) async throws -> ApprovalRequest? {
        if case .read(let read) = woken { return asSeenNow(read.request, ifMadeBy: integrationID) }
        return try await status(of: id, integrationID: integrationID)
    }

    /// The version of live request `id` while the reader sees it pending;
    /// `nil` when it is not, or is not in this node's index (a cluster's
    /// nodes read the database). Synchronous: see ``waitForChange(of:integrationID:timeout:)``.
    @inline(never)
    nonisolated func livePendingVersion(of id: String, integrationID: String?) -> Int? {
        Self.pendingVersion(asSeenNow(live.held(id), ifMadeBy: integrationID))
    }

    /// The request as a reader must see it now, whoever made it.
    nonisolated func current(_ id: String) async throws -> ApprovalRequest? {
        asSeenNow(try await load(id))
    }

    @inline(never)
    nonisolated private func asSeenNow(_ request: ApprovalRequest?) -> ApprovalRequest? {
        guard var request else { return nil }
        request.state = ApprovalStateMachine(request).state(at: now())
        return request
    }

    @inline(never)
    nonisolated private func asSeenNow(_ request: ApprovalRequest?, ifMadeBy integrationID: String?) -> ApprovalRequest? {
        guard let request, request.integrationID == integrationID else { return nil }
        return asSeenNow(request)
    }

    public func complete(
        _ id: String, integrationID: String? = nil, context: AuditContext = .system, logger: Logger? = nil
    ) async throws -> ApprovalRequest {
        try await perform(on: id, requester: integrationID, context: context, logger: logger ?? self.logger) { machine, now in
            machine.complete(at: now)
        }
        .request
    }

    public func cancel(
        _ id: String, integrationID: String? = nil, context: AuditContext = .system, logger: Logger? = nil
    ) async throws -> ApprovalRequest {
        try await perform(on: id, requester: integrationID, context: context, logger: logger ?? self.logger) { machine, now in
            machine.cancel(at: now)
        }
        .request
    }

    // MARK: Approver side

    /// Pending requests of a user, newest first.
    public func pendingRequests(ofUser userID: String) async throws -> [ApprovalRequest] {
        try await live.pending(ofUser: userID, at: now())
    }

    /// One request of a user; another user's (or an unknown) request is `nil`.
    public func request(_ id: String, ofUser userID: String) async throws -> ApprovalRequest? {
        guard let request = try await current(id), request.userID == userID else { return nil }
        return request
    }

    /// A trusted device of `userID` answers. Returns the stored request and how the answer ended.
    ///
    /// With `reportFraud` (a denial that says "this was not me"), the user's
    /// prompts are silenced for ``BrokerConfiguration/fraudSilence`` from the
    /// moment of the answer: later requests for them prompt no device.
    public func respond(
        to id: String,
        userID: String,
        deviceID: String,
        decision: ApprovalDecision,
        numberCode: String?,
        keyBound: Bool = false,
        reportFraud: Bool = false,
        context: AuditContext = .system,
        logger: Logger? = nil
    ) async throws -> (request: ApprovalRequest, answer: AnswerOutcome) {
        let logger = logger ?? self.logger
        let (request, transition) = try await perform(on: id, approver: userID, context: context, logger: logger) { machine, now in
            machine.respond(decision, numberCode: numberCode, deviceID: deviceID, keyBound: keyBound, at: now)
        }
        if reportFraud {
            let until = transition.at.addingTimeInterval(configuration.fraudSilence)
            try await approvers.silencePrompts(userID: userID, until: until)
            logger.warning("fraud reported: prompts silenced", metadata: ["user": "\(userID)", "device": "\(deviceID)"])
            audit.record(
                AuditEvent(
                    at: transition.at, kind: .fraudReported, userID: userID, requestRef: request.logReference, context: context,
                    detail: "prompts silenced until \(Timestamp.string(until))"))
        }
        return (request, AnswerOutcome(transition.cause))
    }

    /// The requester typed a right code (checked by ``CodeAnswers``): approves
    /// request `id` of `integrationID` (`nil`: a phone reset) as a device's answer would.
    public func approve(
        byCode id: String, integrationID: String?, via: AnswerVia, deviceID: String?, context: AuditContext, logger: Logger
    ) async throws -> ApprovalRequest {
        try await perform(on: id, requester: integrationID, context: context, logger: logger) { machine, now in
            machine.approveByCode(via: via, deviceID: deviceID, at: now)
        }
        .request
    }

    /// Request `id` took its last wrong code: denied.
    public func denyAfterWrongCodes(_ id: String, integrationID: String?, context: AuditContext, logger: Logger) async throws {
        _ = try await perform(on: id, requester: integrationID, context: context, logger: logger) { machine, now in
            machine.denyAfterWrongCodes(at: now)
        }
    }

    // MARK: Applying decisions

    /// Applies `event` to the request, if it is the approver's (a device's
    /// user) or, without an approver, the requester's (an integration, or with
    /// `nil` the phone reset); anyone else's is not found.
    private func perform(
        on id: String,
        approver userID: String? = nil,
        requester integrationID: String? = nil,
        context: AuditContext,
        logger: Logger,
        _ event: (inout ApprovalStateMachine, Date) -> MachineVerdict
    ) async throws -> (request: ApprovalRequest, transition: Transition) {
        guard let request = try await load(id) else { throw BrokerError.notFound }
        if let userID {
            guard request.userID == userID else { throw BrokerError.notFound }
        } else {
            guard request.integrationID == integrationID else { throw BrokerError.notFound }
        }
        var machine = ApprovalStateMachine(request)
        switch event(&machine, now()) {
        case .refuse(let refusal):
            throw BrokerError.refused(refusal)
        case .expire(let timeOut):
            // Write the time-out now rather than wait for the sweeper.
            try await commit(timeOut, machine.request, context: .system, logger: logger)
            throw BrokerError.refused(.expired)
        case .persist(let transition):
            if try await commit(transition, machine.request, context: context, logger: logger) {
                return (machine.request, transition)
            }
            // Another caller changed the row first: answer with what it holds now.
            guard let current = try await current(id) else { throw BrokerError.notFound }
            throw BrokerError.refused(current.state == .expired ? .expired : .conflict(current.state))
        }
    }

    /// Persists a transition; on success mirrors it in memory, wakes waiters and
    /// queues the resolution push. On a lost race, wakes the waiters (they read
    /// the winner's state) and refreshes the index from the database.
    @discardableResult
    private func commit(_ transition: Transition, _ request: ApprovalRequest, context: AuditContext, logger: Logger) async throws -> Bool {
        let event = WebhookEvent.outboxItem(for: request, after: transition)
        // A signed answer's proof is written with the transition, not later with the rest of the trail.
        let proven = context.proof == nil ? nil : TransitionEffects.auditEvent(transition, request, context: context)
        if try await store.apply(transition, to: request, event: event, audit: proven, writeTime: now) {
            didCommit(transition, request, context: context, audited: proven != nil, logger: logger)
            return true
        }
        // The read below suspends this actor: another transition may commit (and
        // be mirrored) before it returns, so what it read may already be stale.
        if let stored = try await store.request(id: request.id) {
            live.refresh(with: stored)
        } else {
            // The row is gone (its user erased): the copy held must not be tried again, by the
            // expiry sweep or an answer; a read of it finds nothing, as on every node.
            live.forget(request.id)
        }
        wake(request.id)
        return false
    }

    /// `audited`: the transition's audit event was written with it.
    private func didCommit(_ transition: Transition, _ request: ApprovalRequest, context: AuditContext, audited: Bool = false, logger: Logger) {
        live.mirror(request)
        // The waiting long polls first: the metrics, audit and log line below need not delay their answer.
        // On a shared database they answer from the request as committed, as from the read after
        // another node's change (``changed(_:)``), where each would read it again; held in
        // memory, each reads the copy held when it answers.
        wake(request.id, live.readsThrough ? .read(ReadForWaiters(request)) : .changed)
        observer(transition)
        let effects = TransitionEffects(of: transition, on: request, context: context, auditedWithIt: audited)
        for event in effects.audit { audit.record(event) }
        if effects.ringsOutbox { outboxBell?.ring() }
        logger.info(
            "approval request \(transition.to.rawValue)",
            metadata: ["request": "\(request.logReference)", "from": "\(transition.from.rawValue)", "cause": "\(transition.cause.rawValue)"]
        )
        if let job = effects.push { push(job, logger: logger) }
    }

    /// The store cancelled these phone resets in the transaction that changed
    /// the user's password another way (see ``EmailResetStore/redeemEmailReset(id:passwordHash:now:)``,
    /// which also audited them): mirrors the machine's same transition, wakes
    /// their long polls and tells the devices a pending prompt is gone.
    public func passwordChanged(userID: String, cancelled: [CancelledReset], at: Date, logger: Logger) {
        for item in cancelled {
            let transition = Transition(from: item.from, to: .cancelled, cause: .passwordChanged, at: at)
            if let held = live.held(item.id) {
                var machine = ApprovalStateMachine(held)
                if machine.cancelForPasswordChange(at: at) != nil { live.mirror(machine.request) }
            }
            wake(item.id)
            observer(transition)
            logger.info(
                "approval request cancelled",
                metadata: ["request": "\(ApprovalRequest.logReference(of: item.id))", "from": "\(item.from.rawValue)", "cause": "password_changed"])
            if item.from == .pending { push(.resolved(requestID: item.id, userID: userID, status: .cancelled), logger: logger) }
        }
    }

    /// The store cancelled these requests in the transaction that erased their user or deleted
    /// their integration (``RemovalStore``, which also audited them): mirrors the machine's same
    /// transition, wakes their long polls, rings the outbox for their webhook events and, for a
    /// user who still has devices (an integration deleted), tells them a pending prompt is gone.
    public func removed(_ cancelled: [CancelledRequest], at: Date, logger: Logger) {
        for item in cancelled {
            let transition = Transition(from: item.from, to: .cancelled, cause: item.cause, at: at)
            let held = live.held(item.id)
            if let held {
                var machine = ApprovalStateMachine(held)
                if machine.cancelForRemoval(item.cause, at: at) != nil { live.mirror(machine.request) }
            }
            wake(item.id)
            observer(transition)
            logger.info(
                "approval request cancelled",
                metadata: [
                    "request": "\(ApprovalRequest.logReference(of: item.id))", "from": "\(item.from.rawValue)", "cause": "\(item.cause.rawValue)",
                ])
            if item.cause == .integrationDeleted, item.from == .pending, let userID = held?.userID {
                push(.resolved(requestID: item.id, userID: userID, status: .cancelled), logger: logger)
            }
        }
        if !cancelled.isEmpty { outboxBell?.ring() }
    }

    /// Hands a push to the dispatcher; a job dropped from a full queue is logged and audited.
    private func push(_ job: PushJob, logger: Logger) {
        guard let dropped = pushQueue.enqueue(job) else { return }
        logger.warning(
            "push queue full: dropped the oldest job of its kind", metadata: ["type": "\(dropped.type)", "request": "\(dropped.requestRef ?? "-")"])
        audit.record(
            AuditEvent(
                at: now(), kind: .pushed, userID: dropped.userID, requestRef: dropped.requestRef, detail: "\(dropped.type): dropped, push queue full")
        )
    }

    nonisolated private func load(_ id: String) async throws -> ApprovalRequest? {
        try await live.request(id)
    }
}

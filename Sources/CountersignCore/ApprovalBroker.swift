import Foundation
import Logging

public struct BrokerConfiguration: Sendable, Equatable {
    /// How long a request stays pending.
    public var requestTTL: TimeInterval
    /// How long an approved request may wait for completion.
    public var completionWindow: TimeInterval
    /// Whether approvals must carry the number code shown to the requester.
    public var numberMatching: Bool

    public init(requestTTL: TimeInterval = 60, completionWindow: TimeInterval = 120, numberMatching: Bool = true) {
        self.requestTTL = requestTTL
        self.completionWindow = completionWindow
        self.numberMatching = numberMatching
    }
}

public enum BrokerError: Error, Equatable {
    /// No such request, or not one the caller may see.
    case notFound
    case refused(Refusal)
}

/// Owns the live approval requests: applies the decisions of
/// ``ApprovalStateMachine``, persists them, wakes long-poll waiters and hands
/// pushes to the ``PushQueue``.
///
/// The database is the arbiter of races: each transition is a conditional
/// update that changes one row or none. The actor's own state (the index of
/// live requests and the waiters) only mirrors what the database accepted, so
/// actor re-entrancy at an `await` cannot make two callers both win.
public actor ApprovalBroker {
    private let store: any ApprovalStore
    private let configuration: BrokerConfiguration
    private let pushQueue: PushQueue
    private let audit: AuditLog
    private let logger: Logger
    private let now: @Sendable () -> Date
    private let observer: @Sendable (Transition) -> Void

    /// Pending and approved requests, by id.
    private var live: [String: ApprovalRequest] = [:]
    /// Long-poll waiters, by request id, then by waiter number.
    private var waiters: [String: [Int: CheckedContinuation<Void, Never>]] = [:]
    private var nextWaiter = 0
    private var draining = false
    /// When the expiry sweep last completed: the watchdog's sign of life.
    public private(set) var lastSweep: Date?

    public init(
        store: any ApprovalStore,
        configuration: BrokerConfiguration,
        pushQueue: PushQueue,
        audit: AuditLog,
        logger: Logger,
        now: @escaping @Sendable () -> Date = { Date() },
        observer: @escaping @Sendable (Transition) -> Void = { _ in }
    ) {
        self.observer = observer
        self.store = store
        self.configuration = configuration
        self.pushQueue = pushQueue
        self.audit = audit
        self.logger = logger
        self.now = now
    }

    // MARK: Start-up and sweeping

    /// Loads the live requests from the database and expires the overdue ones.
    public func start() async throws {
        for request in try await store.liveRequests() {
            live[request.id] = request
        }
        logger.info("approval index loaded", metadata: ["live": "\(live.count)"])
        try await expireDue()
    }

    /// Writes `expired` for every live request whose deadline has passed and wakes its waiters.
    public func expireDue() async throws {
        let now = now()
        let due = live.values.filter { ($0.deadline ?? .distantFuture) <= now }
        for request in due {
            var machine = ApprovalStateMachine(request)
            guard let transition = machine.expireIfDue(at: now) else { continue }
            try await commit(transition, machine.request, context: .system, logger: logger)
        }
        lastSweep = now
    }

    /// Counts of live requests by state, for status lines and metrics.
    public func liveCounts() -> [ApprovalState: Int] {
        live.values.reduce(into: [:]) { counts, request in counts[request.state, default: 0] += 1 }
    }

    /// Answers every long poll now and every later one at once: the server is shutting down.
    public func drain() {
        draining = true
        for id in Array(waiters.keys) { wake(id) }
    }

    // MARK: Requester side

    /// Starts a request.
    ///
    /// - Parameters:
    ///   - userID: whose devices may approve it and are prompted; `nil` for an
    ///     unknown email or a silenced user: the request looks the same from
    ///     outside, no device sees it, and it expires unanswered.
    ///   - subject: what newer requests replace: the user id, or a hash of the unknown email.
    ///   - auditUserID: the account the audit trail names, when known.
    public func initiate(
        userID: String?,
        subject: String,
        action: ApprovalAction = .passwordReset,
        newPasswordHash: String,
        requester: RequesterInfo,
        auditUserID: String? = nil,
        context: AuditContext = .system,
        logger requestLogger: Logger? = nil
    ) async throws -> (request: ApprovalRequest, numberCode: String?) {
        let logger = requestLogger ?? self.logger
        let now = now()
        let code = configuration.numberMatching ? NumberCode.generate() : nil
        let request = ApprovalRequest(
            id: SecureToken.requestID(),
            userID: userID,
            subject: subject,
            action: action,
            state: .pending,
            createdAt: now,
            expiresAt: now.addingTimeInterval(configuration.requestTTL),
            completionWindow: configuration.completionWindow,
            updatedAt: now,
            numberCode: code.map(NumberCode.seal),
            newPasswordHash: newPasswordHash,
            requester: requester
        )
        let superseded = try await store.insert(request)
        live[request.id] = request
        for id in superseded {
            guard let old = live[id] else { continue }
            var machine = ApprovalStateMachine(old)
            if let transition = machine.supersede(at: now) {
                didCommit(transition, machine.request, context: context, logger: logger)
            }
        }
        logger.info("approval request created", metadata: ["request": "\(request.logReference)", "prompt": "\(userID != nil)"])
        audit.record(
            AuditEvent(
                at: now, kind: .requestCreated, userID: userID ?? auditUserID, requestRef: request.logReference, context: context,
                detail: userID != nil ? nil : auditUserID != nil ? "prompts silenced" : "unknown email"))
        if let userID {
            pushQueue.enqueue(
                .prompt(requestID: request.id, userID: userID, action: action, expiresAt: request.expiresAt, requester: requester))
        }
        return (request, code)
    }

    /// The request as a reader must see it now (a live request past its deadline reads `expired`).
    public func status(of id: String) async throws -> ApprovalRequest? {
        guard var request = try await load(id) else { return nil }
        request.state = ApprovalStateMachine(request).state(at: now())
        return request
    }

    /// Long poll: returns at once unless the request is pending; otherwise when
    /// it changes, when `timeout` passes, when the caller is cancelled, or when the server drains.
    public func waitForChange(of id: String, timeout: Duration) async throws -> ApprovalRequest? {
        guard let request = try await status(of: id) else { return nil }
        guard request.state == .pending, timeout > .zero, !draining else { return request }
        let number = nextWaiter
        nextWaiter += 1
        let timer = Task { [weak self] in
            try? await Task.sleep(for: timeout)
            await self?.wake(id, waiter: number)
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                if Task.isCancelled || draining {
                    continuation.resume()
                } else {
                    waiters[id, default: [:]][number] = continuation
                }
            }
        } onCancel: {
            Task { await self.wake(id, waiter: number) }
        }
        timer.cancel()
        return try await status(of: id)
    }

    public func complete(_ id: String, context: AuditContext = .system, logger: Logger? = nil) async throws -> ApprovalRequest {
        try await perform(on: id, ownedBy: nil, context: context, logger: logger ?? self.logger) { machine, now in machine.complete(at: now) }
            .request
    }

    public func cancel(_ id: String, context: AuditContext = .system, logger: Logger? = nil) async throws -> ApprovalRequest {
        try await perform(on: id, ownedBy: nil, context: context, logger: logger ?? self.logger) { machine, now in machine.cancel(at: now) }
            .request
    }

    // MARK: Approver side

    /// Pending requests of a user, newest first.
    public func pendingRequests(ofUser userID: String) -> [ApprovalRequest] {
        let now = now()
        return live.values
            .filter { $0.userID == userID && ApprovalStateMachine($0).state(at: now) == .pending }
            .sorted { $0.createdAt > $1.createdAt }
    }

    /// One request of a user; another user's (or an unknown) request is `nil`.
    public func request(_ id: String, ofUser userID: String) async throws -> ApprovalRequest? {
        guard let request = try await status(of: id), request.userID == userID else { return nil }
        return request
    }

    /// A trusted device of `userID` answers. Returns the stored request and the transition that won.
    public func respond(
        to id: String,
        userID: String,
        deviceID: String,
        decision: ApprovalDecision,
        numberCode: String?,
        context: AuditContext = .system,
        logger: Logger? = nil
    ) async throws -> (request: ApprovalRequest, transition: Transition) {
        try await perform(on: id, ownedBy: userID, context: context, logger: logger ?? self.logger) { machine, now in
            machine.respond(decision, numberCode: numberCode, deviceID: deviceID, at: now)
        }
    }

    // MARK: Applying decisions

    private func perform(
        on id: String,
        ownedBy userID: String?,
        context: AuditContext,
        logger: Logger,
        _ event: (inout ApprovalStateMachine, Date) -> MachineAction
    ) async throws -> (request: ApprovalRequest, transition: Transition) {
        guard let request = try await load(id), userID == nil || request.userID == userID else {
            throw BrokerError.notFound
        }
        let now = now()
        var machine = ApprovalStateMachine(request)
        switch event(&machine, now) {
        case .refuse(let refusal):
            if refusal == .expired {
                // Write the time-out now rather than wait for the sweeper.
                var expiring = ApprovalStateMachine(request)
                if let transition = expiring.expireIfDue(at: now) {
                    try await commit(transition, expiring.request, context: .system, logger: logger)
                }
            }
            throw BrokerError.refused(refusal)
        case .persist(let transition):
            if try await commit(transition, machine.request, context: context, logger: logger) {
                return (machine.request, transition)
            }
            // Another caller changed the row first: answer with what it holds now.
            guard let current = try await status(of: id) else { throw BrokerError.notFound }
            throw BrokerError.refused(current.state == .expired ? .expired : .conflict(current.state))
        }
    }

    /// Persists a transition; on success mirrors it in memory, wakes waiters and
    /// queues the resolution push. On a lost race, refreshes the index from the database.
    @discardableResult
    private func commit(_ transition: Transition, _ request: ApprovalRequest, context: AuditContext, logger: Logger) async throws -> Bool {
        if try await store.apply(transition, to: request) {
            didCommit(transition, request, context: context, logger: logger)
            return true
        }
        if let stored = try await store.request(id: request.id) {
            mirror(stored)
        }
        return false
    }

    private func didCommit(_ transition: Transition, _ request: ApprovalRequest, context: AuditContext, logger: Logger) {
        mirror(request)
        observer(transition)
        audit.record(
            AuditEvent(
                at: transition.at, kind: transition.cause.auditKind, userID: request.userID ?? request.auditSubjectUser,
                requestRef: request.logReference, context: context,
                detail: transition.cause == .supersededByNewerRequest ? "superseded by a newer request" : nil))
        logger.info(
            "approval request \(transition.to.rawValue)",
            metadata: ["request": "\(request.logReference)", "from": "\(transition.from.rawValue)", "cause": "\(transition.cause.rawValue)"]
        )
        wake(request.id)
        if transition.from == .pending, let userID = request.userID {
            pushQueue.enqueue(.resolved(requestID: request.id, userID: userID, status: transition.to))
        }
    }

    private func mirror(_ request: ApprovalRequest) {
        if request.state.isLive {
            live[request.id] = request
        } else {
            live[request.id] = nil
        }
    }

    private func load(_ id: String) async throws -> ApprovalRequest? {
        if let request = live[id] { return request }
        guard SecureToken.isWellFormed(id) else { return nil }
        return try await store.request(id: id)
    }

    private func wake(_ id: String) {
        guard let waiting = waiters.removeValue(forKey: id) else { return }
        for continuation in waiting.values { continuation.resume() }
    }

    private func wake(_ id: String, waiter number: Int) {
        guard let continuation = waiters[id]?.removeValue(forKey: number) else { return }
        if waiters[id]?.isEmpty == true { waiters[id] = nil }
        continuation.resume()
    }
}

extension TransitionCause {
    var auditKind: AuditKind {
        switch self {
        case .approvedByDevice: .approved
        case .deniedByDevice: .denied
        case .numberMismatch: .numberMismatch
        case .completedByRequester: .completed
        case .cancelledByRequester, .supersededByNewerRequest: .cancelled
        case .timedOut: .expired
        }
    }
}

extension ApprovalRequest {
    /// The user a request without approvers was for (a silenced user), when its subject names one.
    var auditSubjectUser: String? {
        subject.hasPrefix(ApprovalRequest.unknownSubjectPrefix) ? nil : subject
    }

    /// Subjects of requests for unknown emails start with this.
    public static let unknownSubjectPrefix = "unknown:"

    /// The request id is the requester's credential: logs carry a short hash of it instead.
    public var logReference: String { Self.logReference(of: id) }

    public static func logReference(of id: String) -> String {
        String(SecureToken.sha256Hex(id).prefix(12))
    }
}

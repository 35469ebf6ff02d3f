/// Long polling: a requester waits for its pending request to change.
///
/// Each waiter is parked in ``LongPollWaiters``: a suspended task's
/// continuation, or the action of a connection that holds its poll without a
/// task (``park(_:until:unlessChangedFrom:hangUp:then:)``). Whoever wakes it
/// first takes it out, so it is woken exactly once whichever of the five
/// wake-ups comes first: a committed transition (`wake(id)`), its timer, the
/// caller's cancellation, its client hanging up, or the server draining.
extension ApprovalBroker {
    /// Returns at once unless the request is pending; otherwise when it
    /// changes, when `timeout` passes, when the caller is cancelled, or when
    /// the server drains. Answers with the state as a reader sees it then.
    /// Reads only a request of the requester `integrationID` (`nil`: the phone reset), as ``status(of:integrationID:)``.
    public func waitForChange(
        of id: String, integrationID: String? = nil, timeout: Duration, hangUp: (any HangUpSignal)? = nil
    ) async throws -> ApprovalRequest? {
        let deadline = ContinuousClock.now.advanced(by: timeout)
        // Only the version is held while parked (see ``status(of:integrationID:)``
        // on frame sizes); the request is read again for the answer: one read
        // more per long poll for about 3 KiB less held by each waiting one. (In
        // a cluster the polls one notification wakes share their queries: ``SharedReads``.)
        if let version = try await pendingVersion(of: id, integrationID: integrationID) {
            await waitWhilePending(id, integrationID: integrationID, version: version, until: deadline, hangUp: hangUp)
        }
        return try await status(of: id, integrationID: integrationID)
    }

    /// Waits while request `id` is pending at `version` (as read before):
    /// until it changes, `deadline` passes, the caller is cancelled, `hangUp`
    /// fires (its client is gone) or the server drains. A wake-up that only
    /// may have changed the request (``recheckAll()``, after a cluster's
    /// notification gap) reads it, and waits on for the time left if it has
    /// not changed. Inlinable: its frame is part of its caller's, one less
    /// kept by each waiting long poll.
    @inlinable
    nonisolated public func waitWhilePending(
        _ id: String, integrationID: String?, version: Int, until deadline: ContinuousClock.Instant, hangUp: (any HangUpSignal)? = nil
    ) async {
        while await park(id, until: deadline, unlessChangedFrom: version, hangUp: hangUp) == .recheck, ContinuousClock.now < deadline {
            guard (try? await pendingVersion(of: id, integrationID: integrationID)) == version else { return }
        }
    }

    /// The version of request `id` while the reader sees it pending; `nil` once it is not, or is not there.
    @inline(never)
    nonisolated public func pendingVersion(of id: String, integrationID: String?) async throws -> Int? {
        // A pending request is live: read from the index without an `await`,
        // so no frame of the read is added to the long poll's task.
        if let version = livePendingVersion(of: id, integrationID: integrationID) { return version }
        return Self.pendingVersion(try await status(of: id, integrationID: integrationID))
    }

    @inline(never)
    static func pendingVersion(_ request: ApprovalRequest?) -> Int? {
        guard let request, request.state == .pending else { return nil }
        return request.version
    }

    /// Parks the caller until request `id` changes, `deadline` passes, the
    /// caller is cancelled, `hangUp` fires (its client is gone) or the server
    /// drains; at once if the request is no longer at `version`. Returns why
    /// it woke (``LongPollWake``): only after ``recheckAll()`` must the caller
    /// read the request to know whether it changed.
    ///
    /// The read of `version` before parking was not on the actor: a
    /// transition committed in between has already woken the waiters it found,
    /// so a request whose index entry is no longer at `version` is not waited for.
    @inline(never)
    public func park(
        _ id: String, until deadline: ContinuousClock.Instant, unlessChangedFrom version: Int, hangUp: (any HangUpSignal)? = nil
    ) async -> LongPollWake {
        let number = polls.newNumber()
        schedule(WaiterTimeout(at: deadline, id: id, number: number))
        // Runs at once if the client is gone already: its wake-up then hops onto
        // the actor after the registration below, and finds the waiter (which
        // registration also resumes at once, seeing the hang-up itself).
        let hangUpAction = hangUp?.whenHungUp { [weak self] in
            Task { await self?.wake(id, waiter: number) }
        }
        let woken = await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<LongPollWake, Never>) in
                // The cancel-while-registering race: the caller may be cancelled
                // after `withTaskCancellationHandler` began but before this body
                // runs on the actor. The `onCancel` handler then runs at once, on
                // another thread, and its `wake(id, waiter:)` hops onto the actor:
                // it may run before this registration (finding nothing to wake)
                // or after it (resuming it). So registration checks for
                // cancellation itself; and since both run on the actor, one of
                // the two always sees the other, and the continuation can never
                // be left parked. The same holds for `draining` and the hang-up.
                register(continuation, id, number, unlessChangedFrom: version, hangUp: hangUp)
            }
        } onCancel: {
            Task { await self.wake(id, waiter: number) }
        }
        if let hangUpAction { hangUp?.forget(hangUpAction) }
        // Waiting again after a recheck: not once the server drains, the client is gone or the caller is cancelled.
        if woken == .recheck, draining || Task.isCancelled || hangUp?.hasHungUp == true { return .stopped }
        return woken
    }

    /// Parks `continuation` as waiter `number` of request `id`, or resumes it at once.
    @inline(never)
    private func register(
        _ continuation: CheckedContinuation<LongPollWake, Never>, _ id: String, _ number: Int, unlessChangedFrom version: Int,
        hangUp: (any HangUpSignal)?
    ) {
        if Task.isCancelled || draining || hangUp?.hasHungUp == true {
            continuation.resume(returning: .stopped)
        } else if live.hasMoved(id, pastVersion: version) {
            continuation.resume(returning: .changed)
        } else {
            polls.park(.task(continuation), id: id, number: number)
            if live.readsThrough { recheckAfterParking(id, version) }
        }
    }

    /// Parks a long poll that no task waits for: `action` runs once, on the
    /// broker (it must only hand its work on), with why the poll woke: when
    /// request `id` changes, `deadline` passes, `hangUp` fires or the server
    /// drains; at once if the request is no longer at `version`, the client
    /// is gone or the server drains already. After ``LongPollWake/recheck``
    /// the caller reads the request and parks again if it has not changed.
    ///
    /// What such a poll holds while it waits is this record and `action`'s
    /// captures: no task, no suspended frames.
    public func park(
        _ id: String, until deadline: ContinuousClock.Instant, unlessChangedFrom version: Int, hangUp: (any HangUpSignal)?,
        then action: @escaping @Sendable (LongPollWake) -> Void
    ) {
        if draining || hangUp?.hasHungUp == true { return action(.stopped) }
        if live.hasMoved(id, pastVersion: version) { return action(.changed) }
        let number = polls.newNumber()
        schedule(WaiterTimeout(at: deadline, id: id, number: number))
        // The hang-up's wake hops onto the actor, after this registration.
        let hangUpAction = hangUp?.whenHungUp { [weak self] in
            Task { await self?.wake(id, waiter: number) }
        }
        polls.park(
            .action { why in
                if let hangUpAction { hangUp?.forget(hangUpAction) }
                action(why)
            }, id: id, number: number)
        if live.readsThrough { recheckAfterParking(id, version) }
    }

    /// On a shared database another node's notification may have arrived
    /// between the read before parking and the parking itself, and found no
    /// waiter to wake: read the request once more now that the waiter is
    /// registered (a notification after this read finds it). Without it such a
    /// poll waited out its whole timeout (a cluster test's poll did, once in
    /// about twenty runs).
    ///
    /// One read at a time per request, in one task: a poll that parks while
    /// that read is under way only asks for one more after it (the read under
    /// way may have looked before the poll parked). Polls parking together
    /// thus share reads, one per read's duration, with one task, where each
    /// started a task of its own.
    ///
    /// A read under way for longer than the reads' patience (250 ms) is
    /// not waited for: its query may be stuck (a connection half-open after a
    /// failover, just when notifications are likely lost). A poll parking then
    /// starts a read of its own, as ``SharedReads`` does for its callers; the
    /// stuck one, when it ends, wakes whom it must and reads no more.
    ///
    /// A pending request has one version (every transition leaves `pending`),
    /// so the read compares with the version of the poll that started it.
    private func recheckAfterParking(_ id: String, _ version: Int) {
        let now = ContinuousClock.now
        if var under = rechecksAfterParking[id], now - under.since <= live.patience {
            under.again = true
            rechecksAfterParking[id] = under
            return
        }
        rechecksStarted += 1
        let recheck = RecheckAfterParking(since: now, number: rechecksStarted)
        rechecksAfterParking[id] = recheck
        Task { [weak self, live] in
            repeat {
                let stored = try? await live.request(id)
                let changed = stored.map { Self.pendingVersion($0) != version } ?? false
                guard let self, await self.recheckedAfterParking(id, recheck.number, changed: changed) else { return }
            } while true
        }
    }

    /// Read `number` after parking ended: wakes the request's waiters if it
    /// changed; whether another read is due (a poll parked while it ran, and
    /// no newer read took over from it).
    private func recheckedAfterParking(_ id: String, _ number: Int, changed: Bool) -> Bool {
        if changed { wake(id) }
        guard var under = rechecksAfterParking[id], under.number == number else { return false }
        guard under.again else {
            rechecksAfterParking[id] = nil
            return false
        }
        under.again = false
        under.since = .now
        rechecksAfterParking[id] = under
        return true
    }

    /// Keeps `timeout` until it is due. One task sleeps until the soonest
    /// timeout of all waiters, where a task per waiter cost each waiting poll
    /// its own task and each woken one a cancelled sleep to run. A timeout
    /// whose waiter was woken otherwise stays in the heap until it is due, then wakes nothing.
    @inline(never)
    func schedule(_ timeout: WaiterTimeout) {
        polls.schedule(timeout)
        if let armed = timeoutTimer, armed.at <= timeout.at { return }
        armTimer(for: timeout.at)
    }

    private func armTimer(for instant: ContinuousClock.Instant) {
        timeoutTimer?.task.cancel()
        let task = Task { [weak self] in
            guard (try? await Task.sleep(until: instant, clock: .continuous)) != nil else { return }
            await self?.fireTimeouts()
        }
        timeoutTimer = (task, instant)
    }

    /// Wakes every waiter whose timeout is due, then sleeps until the next.
    func fireTimeouts() {
        timeoutTimer = nil
        for due in polls.takeDue(at: ContinuousClock.now) {
            wake(due.id, waiter: due.number)
        }
        if let next = polls.soonest { armTimer(for: next) }
    }

    /// Answers every long poll now and every later one at once: the server is shutting down.
    public func drain() {
        draining = true
        for id in polls.ids { wake(id, .stopped) }
    }

    /// Long polls parked on this node now.
    public var waiterCount: Int { polls.count }

    /// Another node committed a transition of request `id` (a cluster's notification).
    ///
    /// Its waiters are woken with the request read once for them all, after
    /// the notification (``LongPollWake/read(_:)``), so that a poll its
    /// connection holds answers from that read instead of reading again:
    /// 18,000 polls woken by one approval, each reading in turn (shared reads,
    /// one per query's time), took 0.6–0.7 s to answer where a node that holds
    /// its requests in memory took 0.4–0.5 s. (A poll waiting in its route's
    /// task still reads for its answer.) The read is a query of its own,
    /// not one of ``SharedReads``: it neither waits for a read begun before
    /// the notification, nor holds up the reads of others.
    ///
    /// Every transition leaves `pending`, so any read after the first
    /// notification serves its waiters: a notification while that read is
    /// under way starts no other. The read is not waited for past the reads'
    /// patience (its query may be stuck, as on a connection left half-open by
    /// a failover): the waiters are then woken without it, and read as before.
    public func changed(_ id: String) {
        guard live.readsThrough, polls.waiting(on: id) > 0 else { return wake(id) }
        guard readsForWaiters[id] == nil else { return }
        readsForWaitersStarted += 1
        let number = readsForWaitersStarted
        readsForWaiters[id] = number
        let patience = Task { [weak self, live] in
            guard (try? await Task.sleep(for: live.patience)) != nil else { return }
            await self?.readForWaiters(id, number, ended: nil)
        }
        Task { [weak self, live] in
            let read: Result<ApprovalRequest?, any Error>
            do { read = .success(try await live.requestAlone(id)) } catch { read = .failure(error) }
            patience.cancel()
            await self?.readForWaiters(id, number, ended: read)
        }
    }

    /// The read for the waiters of `id` numbered `number` ended (`nil`: its
    /// patience did first): wakes the waiters, with the request if it was
    /// read, unless its patience ended first and woke them already.
    func readForWaiters(_ id: String, _ number: Int, ended read: Result<ApprovalRequest?, any Error>?) {
        guard readsForWaiters[id] == number else { return }
        readsForWaiters[id] = nil
        switch read {
        case .success(let request): wake(id, .read(ReadForWaiters(request)))
        case .failure, nil: wake(id)
        }
    }

    /// Notifications may have been missed (the connection carrying them
    /// dropped): every waiter re-reads its request, and waits on if it has not changed.
    public func recheckAll() {
        for id in polls.ids { wake(id, .recheck) }
    }

    /// Wakes every waiter of a request: it changed. (A request waited on is
    /// pending, at the only version a pending request has: any transition
    /// committed for it leaves that version.)
    func wake(_ id: String, _ why: LongPollWake = .changed) {
        for waiter in polls.takeAll(id) { waiter.wake(why) }
    }

    /// Wakes one waiter (its timer fired, its caller was cancelled or its client hung up), if still parked.
    func wake(_ id: String, waiter number: Int) {
        polls.take(id, number: number)?.wake(.stopped)
    }
}

/// A parked long poll: a suspended task, or a connection's action.
enum LongPollWaiter: Sendable {
    case task(CheckedContinuation<LongPollWake, Never>)
    case action(@Sendable (LongPollWake) -> Void)

    func wake(_ why: LongPollWake) {
        switch self {
        case .task(let continuation): continuation.resume(returning: why)
        case .action(let action): action(why)
        }
    }
}

/// Why a parked long poll woke.
public enum LongPollWake: Sendable, Equatable {
    /// Its request changed: answer with it.
    case changed
    /// Its request changed, on a shared database: as read once after another
    /// node's change, or as this node committed it, for all its waiters.
    /// Answer with that (``ApprovalBroker/status(of:integrationID:wokenBy:)``).
    case read(ReadForWaiters)
    /// Notifications may have been missed (``ApprovalBroker/recheckAll()``): read the request, and wait again if it has not changed.
    case recheck
    /// Its deadline passed, the server drains, its caller was cancelled or its client hung up: answer now.
    case stopped
}

/// A request's read after parking under way (on a shared database): since when,
/// which it is, and whether a poll parked while it ran.
struct RecheckAfterParking: Sendable {
    var since: ContinuousClock.Instant
    let number: Int
    var again = false
}

/// A request as read or committed once for all the long polls a change woke
/// (`nil`: it is gone). One reference however many polls answer with it.
public final class ReadForWaiters: Sendable, Equatable {
    public let request: ApprovalRequest?

    init(_ request: ApprovalRequest?) {
        self.request = request
    }

    public static func == (lhs: ReadForWaiters, rhs: ReadForWaiters) -> Bool {
        lhs === rhs
    }
}

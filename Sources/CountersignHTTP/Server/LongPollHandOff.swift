import CountersignCore
import DequeModule
import HTTPTypes
import Hummingbird
import HummingbirdCore
import NIOCore
import NIOHTTPTypes
import Synchronization

// A waiting long poll is parked with the broker, not in its route.
//
// A task keeps the deepest stack of async frames it ever ran (about 1 KiB per
// frame) for as long as it lives. A long poll that waited inside its route
// kept the whole route (middleware, controller, request context) and that
// stack for up to 30 s. Here the route runs in a short task (see
// ``ConnectionResponder``): it checks the caller, the rate limit and the
// request, hands the wait on (``LongPollHandOff``) and returns. The wait is
// then a record the broker keeps (``ParkedLongPoll``), with no task at all;
// when it ends, the route's own answer (``LongPollResponse``) reads the status
// as it is then, without the router and middleware again. Both the parking
// and the answers wait their turn (``LongPollTurns``): 18,000 polls sent at
// once on open connections, each route's task kept until the broker had taken
// its poll, cost 25 KiB each where the same polls sent at a steady pace cost 9.4.

/// The hang-up of the connection whose request a route is answering: a route that waits in
/// its own task (a create with `"wait"`) stops waiting when nobody will read its answer.
enum ConnectionHangUp {
    @TaskLocal static var current: (any HangUpSignal)?
}

/// Where a route leaves the wait of its long poll for its connection's responder.
final class LongPollHandOff: Sendable {
    /// The hand-off of the route being run, when its connection can hold its wait.
    @TaskLocal static var current: LongPollHandOff?

    private let parked = Mutex<ParkedLongPoll?>(nil)

    func park(_ poll: ParkedLongPoll) {
        parked.withLock { $0 = poll }
    }

    func take() -> ParkedLongPoll? {
        parked.withLock { $0.take() }
    }

    /// Marks the answer of a route that handed its wait on. Set only by the
    /// daemon, and never written out (``ConnectionResponder`` drops that answer).
    static let marker = HTTPField.Name("x-countersign-parked")!

    /// The route's answer when it handed its wait on.
    static func parkedResponse() -> Response {
        Response(status: .ok, headers: [marker: "1"])
    }
}

/// How a parked long poll is answered once its wait is over: the status as it
/// is then, from the route's own code, without running the router and the
/// middleware again (re-running them for each of 18,000 polls woken by one
/// approval took as long again as writing the answers). The caller is checked
/// again where the route checks it on every call (an integration's key).
///
/// `respond` gets the request as the poll kept it (``KeptRequest``: its method
/// and `Authorization` alone), so an answer that reads anything else of the
/// request must take it from the route when the poll parks.
///
/// `respond` gets a context of its own, not the route's: its client address
/// is the connection's peer, not the one ``RequestIntakeMiddleware`` settled
/// from `X-Forwarded-For`. An answer that audits, limits or logs by address
/// must carry the route's address with it. It also gets what woke the poll
/// (`nil`: a plain poll, or one answered without waiting): on a shared
/// database, the request as read or committed once for all its waiters
/// (``ApprovalBroker/status(of:integrationID:wokenBy:)``).
struct LongPollResponse: Sendable {
    /// The route's template, for the access log and the metrics.
    let route: String
    let respond: StatusResponder
}

/// A status route's answer as it is when called, after what woke its long poll (`nil`: not woken).
typealias StatusResponder = @Sendable (Request, AppRequestContext, LongPollWake?) async throws -> Response

/// A long poll handed on by its route: the request it waits on, at which
/// version, until when, the slot it waits in and how it is answered.
struct ParkedLongPoll: Sendable {
    let broker: ApprovalBroker
    let id: String
    let integrationID: String?
    let version: Int
    let deadline: ContinuousClock.Instant
    let slots: LongPollSlots
    let slot: String
    let answer: LongPollResponse

    /// Takes a slot and parks with the broker until the request changes, the
    /// deadline passes, the client hangs up or the server drains; then gives
    /// the slot back and runs `answer` (which must only hand its work on).
    /// Over the per-address or node cap it does not wait: `answer` runs at once.
    /// After a recheck (``LongPollWake/recheck``) the poll reads its request in
    /// `rechecks`' turn, so that every poll of a node woken at once by a
    /// notification gap does not start a task each.
    func start(hangUp: any HangUpSignal, rechecks: InTurn, answer: @escaping @Sendable (LongPollWake?) -> Void) async {
        guard slots.acquire(slot) else { return answer(nil) }
        await park(hangUp: hangUp, rechecks: rechecks, answer: answer)
    }

    private func park(hangUp: any HangUpSignal, rechecks: InTurn, answer: @escaping @Sendable (LongPollWake?) -> Void) async {
        await broker.park(id, until: deadline, unlessChangedFrom: version, hangUp: hangUp) { [self] woken in
            if woken == .recheck {
                rechecks.run { await recheck(hangUp: hangUp, rechecks: rechecks, answer: answer) }
            } else {
                slots.release(slot)
                answer(woken)
            }
        }
    }

    /// Notifications may have been missed: waits on if the request has not changed.
    private func recheck(hangUp: any HangUpSignal, rechecks: InTurn, answer: @escaping @Sendable (LongPollWake?) -> Void) async {
        if ContinuousClock.now < deadline, !hangUp.hasHungUp,
            (try? await broker.pendingVersion(of: id, integrationID: integrationID)) == version
        {
            await park(hangUp: hangUp, rechecks: rechecks, answer: answer)
        } else {
            slots.release(slot)
            answer(nil)
        }
    }
}

/// Work done in turn by at most `width` tasks, in the order it was handed
/// on: a burst of thousands of long polls parking or being answered at once
/// neither starts a task each nor keeps each route's task (and the stack it
/// grew) while it waits its turn.
final class InTurn: Sendable {
    private struct Queue {
        var work = Deque<@Sendable () async -> Void>()
        var running = 0
    }
    private let queue = Mutex(Queue())
    let width: Int

    init(width: Int) {
        precondition(width > 0)
        self.width = width
    }

    func run(_ work: @escaping @Sendable () async -> Void) {
        let starts = queue.withLock { queue in
            queue.work.append(work)
            guard queue.running < width else { return false }
            queue.running += 1
            return true
        }
        // Detached: a runner takes none of the task-local values of the task
        // that happened to start it (a route's hand-off), and holds no work beyond the piece it is
        // doing. It keeps that task's priority, as a task of its own would
        // have: at the default priority, work handed on by the daemon's
        // services (which run at the main task's) waited behind all of theirs.
        if starts { Task.detached(priority: Task.currentPriority) { await self.runInTurn() } }
    }

    private func runInTurn() async {
        while let work = next() { await work() }
    }

    /// The next piece of work, or `nil` (and one runner fewer) when there is none.
    private func next() -> (@Sendable () async -> Void)? {
        queue.withLock { queue in
            if let work = queue.work.popFirst() { return work }
            queue.running -= 1
            return nil
        }
    }
}

/// What a status route does with its `wait`: the part the phone reset's
/// and the approvals API's status routes share.
struct StatusLongPoll: Sendable {
    let broker: ApprovalBroker
    let slots: LongPollSlots

    enum Outcome {
        /// Answer with the status now: no wait asked, or over a cap.
        case answerNow
        /// The wait is handed on: answer with ``LongPollHandOff/parkedResponse()``.
        case parked
        /// Waited in the route (a server without ``GuardedHTTP1Channel``): the request as it is now.
        case waited(ApprovalRequest?)
    }

    /// Waits `seconds` for request `id` to change, in a slot of the client's
    /// address. Over the per-address or node cap, a long poll is answered at
    /// once (a plain poll). A parked poll is answered by `answer`, made only
    /// when a poll parks (not for every plain poll).
    func poll(
        _ id: String, integrationID: String?, seconds: Int, context: AppRequestContext,
        answer: @autoclosure () -> StatusResponder
    ) async throws -> Outcome {
        guard seconds > 0 else { return .answerNow }
        let slot = context.clientKey
        guard let handOff = LongPollHandOff.current else {
            guard slots.acquire(slot) else { return .answerNow }
            defer { slots.release(slot) }
            return .waited(try await broker.waitForChange(of: id, integrationID: integrationID, timeout: .seconds(seconds)))
        }
        // The slot is taken when the wait starts (``ParkedLongPoll/start(hangUp:rechecks:answer:)``).
        guard let version = try await broker.pendingVersion(of: id, integrationID: integrationID) else { return .answerNow }
        handOff.park(
            ParkedLongPoll(
                broker: broker, id: id, integrationID: integrationID, version: version,
                deadline: ContinuousClock.now.advanced(by: .seconds(seconds)), slots: slots, slot: slot,
                answer: LongPollResponse(route: context.endpointPath ?? "unmatched", respond: answer())))
        return .parked
    }
}

/// Where a listener's long polls wait their turn: to be parked with the
/// broker, one at a time, and to be answered once their wait ends (or to
/// read their request again after a notification gap), 256 at a time.
///
/// Parking 16 at a time made 18,000 polls on a cluster's node cost 18.6 KiB
/// each, not 10.1, when each parking there started a task to read its
/// request and more of those tasks waited at once. When each answer on a
/// cluster's node read its request (reads asked for together sharing a
/// query), answering 16 at a time made 18,000 answers after another node's
/// approval take 2.3 s, 256 at a time 1.0–1.2 s. Such answers now come from
/// one read for them all (``ApprovalBroker/changed(_:)``), or from the
/// request as this node committed it; the others still read (woken by a
/// recheck, a timeout, or after that read's patience), and 256 stays.
struct LongPollTurns: Sendable {
    let parking = InTurn(width: 1)
    let answering = InTurn(width: 256)
}

import CountersignCore
import HTTPTypes
import Hummingbird
import HummingbirdCore
import NIOCore
import NIOHTTPTypes
import Synchronization

// A waiting long poll is parked on its connection, not in its route.
//
// Hummingbird runs each connection as one task, and a task keeps the deepest
// stack of async frames it ever ran (about 1 KiB per frame) for as long as it
// lives. A long poll that waited inside its route kept the whole route
// (middleware, controller, request context) and that stack for up to 30 s.
// Here the route runs in a short task of its own: it checks the caller, the
// rate limit and the request, hands the wait to the connection
// (``LongPollHandOff``) and returns. The connection's task then takes a slot,
// waits with a few frames and a small record (``ParkedLongPoll``), and runs
// the route once more, in another short task, for the answer. The route's
// first answer is dropped on the way out (``ParkedAnswerFilter``).

/// Which run of a status route this is, when its connection can hold its wait.
enum LongPollRun: Sendable {
    /// The first run: a poll that must wait hands its wait to the connection.
    case asking(LongPollHandOff)
    /// The run after the wait: the route answers with the status as it is now,
    /// without counting the poll again. `askedAt` is when the request arrived.
    case answering(askedAt: ContinuousClock.Instant)

    @TaskLocal static var current: LongPollRun?

    /// When the request being answered after its wait arrived.
    static var askedAt: ContinuousClock.Instant? {
        guard case .answering(let askedAt) = current else { return nil }
        return askedAt
    }

    static var isAnswering: Bool { askedAt != nil }
}

/// Where a route leaves the wait of its long poll for the connection.
final class LongPollHandOff: Sendable {
    private let parked = Mutex<ParkedLongPoll?>(nil)

    func park(_ poll: ParkedLongPoll) {
        parked.withLock { $0 = poll }
    }

    func take() -> ParkedLongPoll? {
        parked.withLock { $0.take() }
    }

    /// Marks the answer of a route that handed its wait on. Set only by the
    /// daemon, and never written out: ``ParkedAnswerFilter`` drops that answer.
    static let marker = HTTPField.Name("x-countersign-parked")!

    /// The route's answer when it handed its wait to the connection.
    static func parkedResponse() -> Response {
        Response(status: .ok, headers: [marker: "1"])
    }
}

/// A long poll handed to its connection: the request it waits on, at which
/// version, until when, and the slot it waits in.
struct ParkedLongPoll: Sendable {
    let broker: ApprovalBroker
    let id: String
    let integrationID: String?
    let version: Int
    let deadline: ContinuousClock.Instant
    let slots: LongPollSlots
    let slot: String

    /// Takes a slot, then waits until the request changes, the deadline
    /// passes, the client hangs up or the server drains, and gives the slot
    /// back. Over the per-address or node cap it does not wait: the poll is
    /// answered at once. The slot is taken here, once the route's own answer
    /// is gone, so that a connection whose writes are stuck (a client that
    /// does not read) holds none. Inlined: its frame is part of the
    /// responder's, one less kept by each waiting connection.
    @inline(__always)
    func wait(hangUp: any HangUpSignal) async {
        guard slots.acquire(slot) else { return }
        defer { slots.release(slot) }
        await broker.waitWhilePending(id, integrationID: integrationID, version: version, until: deadline, hangUp: hangUp)
    }
}

/// What a status route does with its `wait`: the part the phone reset's
/// and the approvals API's status routes share.
struct StatusLongPoll: Sendable {
    let broker: ApprovalBroker
    let slots: LongPollSlots

    enum Outcome {
        /// Answer with the status now: no wait asked, over a cap, or the answering run.
        case answerNow
        /// The wait is the connection's now: answer with ``LongPollHandOff/parkedResponse()``.
        case parked
        /// Waited in the route (a server without ``GuardedHTTP1Channel``): the request as it is now.
        case waited(ApprovalRequest?)
    }

    /// Waits `seconds` for request `id` to change, in a slot of `slot`.
    /// Over the per-address or node cap, a long poll is answered at once (a plain poll).
    func poll(_ id: String, integrationID: String?, seconds: Int, slot: String) async throws -> Outcome {
        guard seconds > 0, !LongPollRun.isAnswering else { return .answerNow }
        guard case .asking(let handOff) = LongPollRun.current else {
            guard slots.acquire(slot) else { return .answerNow }
            defer { slots.release(slot) }
            return .waited(try await broker.waitForChange(of: id, integrationID: integrationID, timeout: .seconds(seconds)))
        }
        // The connection takes the slot (``ParkedLongPoll/wait(hangUp:)``).
        guard let version = try await broker.pendingVersion(of: id, integrationID: integrationID) else { return .answerNow }
        handOff.park(
            ParkedLongPoll(
                broker: broker, id: id, integrationID: integrationID, version: version,
                deadline: ContinuousClock.now.advanced(by: .seconds(seconds)), slots: slots, slot: slot))
        return .parked
    }
}

/// The responder of a guarded connection: a request that may be a long poll
/// (a `wait` in its query) runs as described at the top of this file; any
/// other goes straight to the application.
struct LongPollResponder: Sendable {
    let responder: HTTPChannelHandler.Responder
    let outbound: NIOAsyncChannelOutboundWriter<HTTPResponsePart>
    let hangUp: HangUpWatcher

    func respond(_ request: Request, _ writer: consuming ResponseWriter, _ channel: any Channel) async throws {
        guard request.uri.query?.contains("wait=") == true else { return try await responder(request, writer, channel) }
        let askedAt = ContinuousClock.now
        let handOff = LongPollHandOff()
        let (responder, outbound) = (responder, outbound)
        try await Self.inOwnTask {
            try await LongPollRun.$current.withValue(.asking(handOff)) {
                try await responder(request, ResponseWriter(outbound: outbound), channel)
            }
        }
        guard let parked = handOff.take() else { return }
        await parked.wait(hangUp: hangUp)
        // Nobody to answer: no work for a poll whose client is gone (it has no access-log line).
        guard channel.isActive else { return }
        try await Self.inOwnTask {
            try await LongPollRun.$current.withValue(.answering(askedAt: askedAt)) {
                try await responder(request, ResponseWriter(outbound: outbound), channel)
            }
        }
    }

    /// Runs `body` in a task of its own, cancelled with the caller: the stack
    /// it runs goes with that task.
    private static func inOwnTask(_ body: @escaping @Sendable () async throws -> Void) async throws {
        let task = Task(operation: body)
        try await withTaskCancellationHandler {
            try await task.value
        } onCancel: {
            task.cancel()
        }
    }
}

/// Drops the answer a route gives when it hands its long poll's wait to the
/// connection (``LongPollHandOff/parkedResponse()``): the client gets the
/// answer the route writes after the wait instead. Sits between the
/// connection's writer and Hummingbird's connection state handler, which
/// so sees the request in flight until its real answer is written.
final class ParkedAnswerFilter: ChannelOutboundHandler, RemovableChannelHandler {
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart
    private var dropping = false

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch unwrapOutboundIn(data) {
        case .head(let head):
            // Every head decides: a later answer is never dropped for an earlier one left unfinished.
            dropping = head.headerFields[LongPollHandOff.marker] != nil
            if dropping { promise?.succeed() } else { context.write(data, promise: promise) }
        case .body where dropping:
            promise?.succeed()
        case .end where dropping:
            dropping = false
            promise?.succeed()
        default:
            context.write(data, promise: promise)
        }
    }
}

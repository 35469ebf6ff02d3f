import CountersignCore
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import NIOHTTPTypes
import Synchronization

/// Answers the requests of one connection (``GuardedHTTP1Channel``), each in
/// a short task of its own: through the router, as Hummingbird's application
/// does (a request id in the logger, an error the routes did not turn into an
/// answer becomes a bare 500, `Date` and `Server` on every answer).
///
/// A request that may be a long poll (a `wait` in its query) runs the route
/// once to check the caller, the rate limit and the request. A poll that must
/// wait hands its wait on (``LongPollHandOff``) and is parked with the broker
/// (``ParkedLongPoll``); the route's first answer is not written. When the
/// wait ends, the route's answer (``LongPollResponse``) reads the status as it is
/// then, logged as the router's middleware logs an answer. Parking and answering
/// take their turn (``LongPollTurns``): a burst of thousands of polls, sent
/// at once on open connections or woken by one approval, starts a few tasks,
/// not one each.
///
/// A class: each parked poll's answer holds its connection's responder by
/// reference, not a copy of its router, logger and channel (about 250 bytes a poll).
final class ConnectionResponder: Sendable {
    let responder: RouterResponder<AppRequestContext>
    let channel: any Channel
    let hangUp: HangUpActions
    let logger: Logger
    let dates: HTTPDates
    let turns: LongPollTurns
    /// The access log and metrics of a long poll's answer after its wait.
    let accessLog: AccessLogMiddleware

    init(
        responder: RouterResponder<AppRequestContext>, channel: any Channel, hangUp: HangUpActions, logger: Logger, dates: HTTPDates,
        turns: LongPollTurns, accessLog: AccessLogMiddleware
    ) {
        self.responder = responder
        self.channel = channel
        self.hangUp = hangUp
        self.logger = logger
        self.dates = dates
        self.turns = turns
        self.accessLog = accessLog
    }

    /// Answers `request` in a task of its own.
    func start(_ request: Request) {
        Task { await run(request) }
    }

    private func run(_ request: Request) async {
        guard request.uri.query?.contains("wait=") == true else { return await write(respond(to: request)) }
        let askedAt = ContinuousClock.now
        let handOff = LongPollHandOff()
        let response = await LongPollHandOff.$current.withValue(handOff) { await respond(to: request) }
        guard let parked = handOff.take() else { return await write(response) }
        // This task ends here: it has run the whole route and keeps the stack
        // that took until it ends, and parking may wait its turn on the broker
        // behind a burst of thousands of polls.
        // The closure the broker keeps holds the answer alone, not the whole parked record again,
        // and of the request only what the answer reads.
        let (connection, hangUp, turns, answer, kept) = (self, hangUp, turns, parked.answer, KeptRequest(request))
        turns.parking.run {
            await parked.start(hangUp: hangUp, rechecks: turns.answering) { woken in
                turns.answering.run { await connection.answer(kept, askedAt: askedAt, with: answer, after: woken) }
            }
        }
    }

    /// The answer of a long poll once its wait is over (`woken`: what ended it, if it waited).
    private func answer(_ kept: KeptRequest, askedAt: ContinuousClock.Instant, with answer: LongPollResponse, after woken: LongPollWake?) async {
        // Nobody to answer: no work for a poll whose client is gone (it has no access-log line).
        guard channel.isActive else { return }
        let request = kept.request
        let context = newContext()
        var response: Response
        do {
            response = try await answer.respond(request, context, woken)
        } catch {
            // As the router's middleware answers a failure (``RequestIntakeMiddleware``).
            do {
                response = try RequestIntakeMiddleware.response(to: error, request: request, context: context)
            } catch {
                context.logger.debug("Unrecognised Error", metadata: ["error.type": "\(error)"])
                response = Response(status: .internalServerError)
            }
        }
        accessLog.record(request.method, route: answer.route, logger: context.logger, status: response.status, since: askedAt)
        await write(stamped(response))
    }

    private func newContext() -> AppRequestContext {
        var logger = logger
        logger[metadataKey: "hb.request.id"] = .stringConvertible(RequestID())
        return AppRequestContext(source: .init(channel: channel, logger: logger))
    }

    private func respond(to request: Request) async -> Response {
        let context = newContext()
        do {
            // A route that waits in place (a create with `wait`) stops when its client is gone.
            return try await ConnectionHangUp.$current.withValue(hangUp) {
                stamped(try await responder.respond(to: request, context: context))
            }
        } catch {
            context.logger.debug("Unrecognised Error", metadata: ["error.type": "\(error)"])
            return stamped(Response(status: .internalServerError))
        }
    }

    private func stamped(_ response: consuming Response) -> Response {
        response.headers[.date] = dates.now
        response.headers[.server] = "countersign"
        return response
    }

    private func write(_ response: consuming Response) async {
        let head = response.head
        let body = response.body
        do {
            try await body.write(ChannelResponseWriter(channel: channel, head: head))
        } catch {
            // The connection went away under the answer, or the body failed half-written: nothing more can go out.
            logger.trace("Failed to write an answer", metadata: ["error": "\(error)"])
            try? await channel.close()
        }
    }
}

/// What a parked long poll keeps of its request while it waits: its method
/// (for the access log) and its `Authorization` fields (the caller is checked
/// again when the wait ends), all that a ``LongPollResponse`` reads. The
/// request as Hummingbird holds it (head, every field, the parsed URI) cost
/// about 1 KB per waiting poll (9,719 → 8,732 bytes in an A/B at 10,000 held).
struct KeptRequest: Sendable {
    let method: HTTPRequest.Method
    let authorization: [HTTPField]

    init(_ request: Request) {
        method = request.method
        authorization = request.headers[fields: .authorization]
    }

    /// The request the answer reads: the method and the `Authorization` fields, no path and no body.
    var request: Request {
        Request(
            head: HTTPRequest(method: method, scheme: nil, authority: nil, path: nil, headerFields: HTTPFields(authorization)),
            body: RequestBody(buffer: ByteBuffer()))
    }
}

/// Writes an answer to its connection: the head with the first part of the
/// body, and the end with the last, so that an answer of one buffer takes one
/// hop onto the connection's event loop and one flush.
struct ChannelResponseWriter: ResponseBodyWriter {
    let channel: any Channel
    private var head: HTTPResponse?
    private var pending: [HTTPResponsePart] = []
    private var pendingBytes = 0

    init(channel: any Channel, head: HTTPResponse) {
        self.channel = channel
        self.head = head
    }

    mutating func write(_ buffer: ByteBuffer) async throws {
        pending.append(.body(buffer))
        pendingBytes += buffer.readableBytes
        // A long body streams out rather than gathering here.
        if pendingBytes >= 65536 { try await flush() }
    }

    /// Not awaited: the answer's task ends once its last parts are handed to
    /// the event loop (a failed write closes the connection there).
    consuming func finish(_ trailingHeaders: HTTPFields?) async throws {
        pending.append(.end(trailingHeaders))
        let (channel, parts) = (channel, takeParts())
        channel.eventLoop.execute { Self.write(parts, to: channel, promise: nil) }
    }

    private mutating func flush() async throws {
        let (channel, parts) = (channel, takeParts())
        let written = channel.eventLoop.makePromise(of: Void.self)
        channel.eventLoop.execute { Self.write(parts, to: channel, promise: written) }
        try await written.futureResult.get()
    }

    private mutating func takeParts() -> [HTTPResponsePart] {
        defer {
            pending = []
            pendingBytes = 0
        }
        return (head.take().map { [HTTPResponsePart.head($0)] } ?? []) + pending
    }

    private static func write(_ parts: [HTTPResponsePart], to channel: any Channel, promise: EventLoopPromise<Void>?) {
        for part in parts.dropLast() { channel.write(NIOAny(part), promise: nil) }
        channel.writeAndFlush(NIOAny(parts[parts.count - 1]), promise: promise)
    }
}

/// The `Date` of answers (IMF-fixdate, RFC 9110 §5.6.7), formatted once a second.
final class HTTPDates: Sendable {
    private let cached = Mutex<(second: Int, text: String)>((-1, ""))
    private static let style = Date.VerbatimFormatStyle(
        format:
            "\(weekday: .abbreviated), \(day: .twoDigits) \(month: .abbreviated) \(year: .padded(4)) \(hour: .twoDigits(clock: .twentyFourHour, hourCycle: .zeroBased)):\(minute: .twoDigits):\(second: .twoDigits) GMT",
        locale: Locale(identifier: "en_US_POSIX"), timeZone: .gmt, calendar: Calendar(identifier: .gregorian))

    var now: String {
        let date = Date()
        let second = Int(date.timeIntervalSince1970)
        return cached.withLock { cached in
            if cached.second != second { cached = (second, Self.style.format(date)) }
            return cached.text
        }
    }
}

/// The public listener's open connections, so that shutdown waits for them:
/// a connection holds no task the server would wait for (``GuardedHTTP1Channel``).
public final class OpenConnections: Sendable {
    private struct State {
        var open = 0
        var nextWaiter = 0
        var waiting: [Int: CheckedContinuation<Void, Never>] = [:]
    }
    private let state = Mutex(State())

    public init() {}

    func track(_ channel: any Channel) {
        state.withLock { $0.open += 1 }
        channel.closeFuture.whenComplete { [self] _ in
            let waiting = state.withLock { state in
                state.open -= 1
                guard state.open == 0 else { return [CheckedContinuation<Void, Never>]() }
                defer { state.waiting = [:] }
                return Array(state.waiting.values)
            }
            for continuation in waiting { continuation.resume() }
        }
    }

    public var count: Int { state.withLock { $0.open } }

    /// Callers of ``allClosed()`` waiting now.
    var waiting: Int { state.withLock { $0.waiting.count } }

    /// Returns once no connection is open, or the caller is cancelled.
    public func allClosed() async {
        let number = state.withLock { state in
            defer { state.nextWaiter += 1 }
            return state.nextWaiter
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let now = state.withLock { state in
                    if state.open == 0 || Task.isCancelled { return true }
                    state.waiting[number] = continuation
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            state.withLock { $0.waiting.removeValue(forKey: number) }?.resume()
        }
    }
}

import NIOCore
import NIOEmbedded
import NIOHPACK
import NIOHTTP2
import Testing

@testable import CountersignPush

/// The push connection's state (``PushStreams``) alone, driven by events at times the test gives: what each event
/// asks the handler to do.
@Suite final class PushStreamsTests {
    let loop = EmbeddedEventLoop()
    let start = NIODeadline.uptimeNanoseconds(1_000_000_000)
    let head: HPACKHeaders = [":method": "POST", ":path": "/send"]
    /// Every request's promise: the state only says how to complete them, so each is ended here (a second
    /// completion is ignored), as NIO wants of every promise.
    private var promises: [EventLoopPromise<HTTP2PushClient.Response>] = []

    deinit {
        for promise in promises { promise.fail(CancellationError()) }
    }

    func promise() -> EventLoopPromise<HTTP2PushClient.Response> {
        let promise = loop.makePromise(of: HTTP2PushClient.Response.self)
        promises.append(promise)
        return promise
    }

    /// The failure a completed request ended with, or `nil` when it succeeded.
    func failure(_ actions: PushStreams.Actions, _ index: Int = 0) -> HTTP2PushClient.Failure? {
        guard actions.completions.indices.contains(index), case .failure(let error) = actions.completions[index].1 else { return nil }
        return error as? HTTP2PushClient.Failure
    }

    func answer(_ id: Int, status: Int, endStream: Bool = true) -> HTTP2Frame {
        HTTP2Frame(streamID: HTTP2StreamID(id), payload: .headers(.init(headers: [":status": "\(status)"], endStream: endStream)))
    }

    @Test func eachRequestTakesTheNextOddStreamAndItsAnswerCompletesIt() throws {
        var state = PushStreams(streamBudget: 100, now: start)
        let first = state.send(head, body: ByteBuffer(string: "{}"), deadline: start + .seconds(10), token: 1, promise: promise(), now: start)
        let second = state.send(head, body: ByteBuffer(), deadline: start + .seconds(10), token: 2, promise: promise(), now: start)
        #expect(first.write?.id == 1 && second.write?.id == 3)
        #expect(first.completions.isEmpty && !first.close && !first.retire)
        // A 1xx answer is not the answer.
        #expect(state.read(answer(1, status: 103, endStream: false), now: start).completions.isEmpty)
        let body = ByteBuffer(string: "{\"name\":\"x\"}")
        _ = state.read(answer(1, status: 200, endStream: false), now: start)
        let done = state.read(HTTP2Frame(streamID: 1, payload: .data(.init(data: .byteBuffer(body), endStream: true))), now: start)
        guard case .success(let response) = try #require(done.completions.first).1 else {
            Issue.record("the answer failed")
            return
        }
        #expect(response.status == 200)
        #expect(response.body == body)
        #expect(state.streams.keys.sorted() == [3])
    }

    /// At its deadline a request is reset and fails; the connection is retired only if it read nothing since the
    /// request was written.
    @Test func aDeadlineResetsItsStreamAndASilentConnectionIsRetired() {
        var state = PushStreams(streamBudget: 100, now: start)
        _ = state.send(head, body: ByteBuffer(), deadline: start + .seconds(10), token: 1, promise: promise(), now: start)
        _ = state.send(head, body: ByteBuffer(), deadline: start + .seconds(20), token: 2, promise: promise(), now: start + .seconds(5))
        #expect(state.sweep(now: start + .seconds(9)).resets.isEmpty)
        // Something read after the first request was written: that connection is not silent.
        _ = state.read(HTTP2Frame(streamID: .rootStream, payload: .ping(.init(), ack: true)), now: start + .seconds(1))
        let first = state.sweep(now: start + .seconds(10))
        #expect(first.resets == [1])
        #expect(failure(first)?.description == "no answer before the request's deadline")
        #expect(!first.retire && state.takesRequests)
        // Nothing read since the second was written (at 5 s): the connection takes no more, and closes, empty.
        let second = state.sweep(now: start + .seconds(20))
        #expect(second.resets == [3] && second.retire && second.close)
        #expect(!state.takesRequests)
        let refused = state.send(head, body: ByteBuffer(), deadline: start + .seconds(30), token: 3, promise: promise(), now: start)
        #expect(refused.write == nil && failure(refused)?.unsent == true)
    }

    @Test func theStreamBudgetRetiresTheConnectionAndItClosesWhenItsLastStreamEnds() {
        var state = PushStreams(streamBudget: 2, now: start)
        let first = state.send(head, body: ByteBuffer(), deadline: start + .seconds(10), token: 1, promise: promise(), now: start)
        let last = state.send(head, body: ByteBuffer(), deadline: start + .seconds(10), token: 2, promise: promise(), now: start)
        #expect(!first.retire && last.retire && last.write?.id == 3)
        #expect(!state.read(answer(1, status: 200), now: start).close)
        #expect(state.read(answer(3, status: 200), now: start).close)
    }

    /// GOAWAY(NO_ERROR): requests above its last stream and requests still queued fail unsent (to go elsewhere),
    /// the queued ones reset so that they never open; the others finish.
    @Test(arguments: [Int32.max, 1]) func aGracefulGoAwayFailsWhatTheServerDidNotTakeAsUnsent(lastStreamID: Int32) {
        var state = PushStreams(streamBudget: 100, now: start)
        for token in UInt64(1)...3 {
            _ = state.send(head, body: ByteBuffer(), deadline: start + .seconds(10), token: token, promise: promise(), now: start)
        }
        _ = state.wrote(HTTP2Frame(streamID: 1, payload: .headers(.init(headers: head))))
        _ = state.wrote(HTTP2Frame(streamID: 3, payload: .headers(.init(headers: head))))
        let away = state.read(
            HTTP2Frame(streamID: .rootStream, payload: .goAway(lastStreamID: HTTP2StreamID(lastStreamID), errorCode: .noError, opaqueData: nil)),
            now: start)
        #expect(away.retire && !away.close)
        // Stream 5 never left: reset while queued. Stream 3 left: above the last stream, it failed (no reset needed).
        #expect(away.resets == [5])
        #expect(
            away.completions.allSatisfy { if case .failure(let error) = $0.1 { (error as? HTTP2PushClient.Failure)?.unsent == true } else { false } })
        #expect(state.streams.keys.sorted() == (lastStreamID == 1 ? [1] : [1, 3]))
        _ = state.read(answer(3, status: 200), now: start)
        #expect(state.read(answer(1, status: 200), now: start).close)
        let refused = state.send(head, body: ByteBuffer(), deadline: start + .seconds(10), token: 9, promise: promise(), now: start)
        #expect(refused.write == nil && failure(refused)?.unsent == true)
    }

    @Test func aGoAwayWithAnErrorFailsEveryRequestAndCloses() {
        var state = PushStreams(streamBudget: 100, now: start)
        _ = state.send(head, body: ByteBuffer(), deadline: start + .seconds(10), token: 1, promise: promise(), now: start)
        let away = state.read(
            HTTP2Frame(streamID: .rootStream, payload: .goAway(lastStreamID: 1, errorCode: .protocolError, opaqueData: nil)), now: start)
        #expect(away.close && away.retire && failure(away)?.unsent == false)
        let refused = state.send(head, body: ByteBuffer(), deadline: start + .seconds(10), token: 2, promise: promise(), now: start)
        #expect(failure(refused)?.description.contains("GOAWAY") == true)
    }

    @Test func anAnswerLongerThanTheLimitResetsItsStream() {
        var state = PushStreams(streamBudget: 100, now: start)
        _ = state.send(head, body: ByteBuffer(), deadline: start + .seconds(10), token: 1, promise: promise(), now: start)
        _ = state.read(answer(1, status: 200, endStream: false), now: start)
        let half = ByteBuffer(repeating: 0x61, count: HTTP2PushClient.maximumBody / 2)
        #expect(state.read(HTTP2Frame(streamID: 1, payload: .data(.init(data: .byteBuffer(half)))), now: start).resets.isEmpty)
        #expect(state.read(HTTP2Frame(streamID: 1, payload: .data(.init(data: .byteBuffer(half)))), now: start).resets.isEmpty)
        let over = state.read(HTTP2Frame(streamID: 1, payload: .data(.init(data: .byteBuffer(ByteBuffer(string: "a"))))), now: start)
        #expect(over.resets == [1] && failure(over)?.description.contains("longer than") == true)
    }

    @Test func aCancelledRequestIsResetOnceAndAServerWithoutHTTP2IsNamedToLaterRequests() {
        var state = PushStreams(streamBudget: 100, now: start)
        _ = state.send(head, body: ByteBuffer(), deadline: start + .seconds(10), token: 7, promise: promise(), now: start)
        let cancelled = state.cancel(7)
        #expect(cancelled.resets == [1])
        #expect(state.cancel(7).resets.isEmpty)
        let failed = state.failed(HTTP2PushClient.Failure("the server does not offer HTTP/2", noHTTP2: true), close: true)
        #expect(failed.close && failed.retire)
        let refused = state.send(head, body: ByteBuffer(), deadline: start + .seconds(10), token: 8, promise: promise(), now: start)
        #expect(failure(refused)?.noHTTP2 == true && failure(refused)?.unsent == true)
    }

    @Test func anIdleConnectionClosesAfterAMinuteAndTheWindowIsToppedUpOnceAtATime() {
        var state = PushStreams(streamBudget: 100, now: start)
        #expect(!state.sweep(now: start + .seconds(30)).close)
        let idle = state.sweep(now: start + .seconds(60))
        #expect(idle.close && idle.retire)

        var window = PushStreams(streamBudget: 100, now: start)
        #expect(window.windowShrank(to: PushStreams.connectionWindow / 2 + 1).windowUpdate == nil)
        #expect(window.windowShrank(to: 1000).windowUpdate == PushStreams.connectionWindow - 1000)
        #expect(window.windowShrank(to: 500).windowUpdate == nil)
        window.windowToppedUp()
        #expect(window.windowShrank(to: 500).windowUpdate == PushStreams.connectionWindow - 500)
    }
}

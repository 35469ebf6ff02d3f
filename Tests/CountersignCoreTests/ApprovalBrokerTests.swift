import CountersignStore
import Foundation
import Logging
import PostgresTestSupport
import Synchronization
import TestSupport
import Testing

@testable import CountersignCore

/// The broker over a real database, SQLite and PostgreSQL: races decided by the
/// database, the live requests (held in memory on SQLite, read through on
/// PostgreSQL), supersede, expiry and fraud silence on the broker's clock.
@Suite struct ApprovalBrokerTests {
    static let email = "ana@example.com"

    /// A clock the test moves by hand.
    final class TestClock: Sendable {
        private let current = Mutex(Date(timeIntervalSince1970: 1_800_000_000))
        var now: Date { current.withLock { $0 } }
        func advance(_ seconds: TimeInterval) { current.withLock { $0 += seconds } }
    }

    /// A broker (and, for races, a second one) on one database.
    struct Harness {
        let store: any CountersignStorage
        let audit = AuditLog()
        let clock = TestClock()

        func broker(
            configuration: BrokerConfiguration = BrokerConfiguration(), approvals: (any ApprovalStore)? = nil,
            readPatience: Duration = .milliseconds(250)
        ) async throws -> ApprovalBroker {
            let clock = clock
            let broker = ApprovalBroker(
                store: approvals ?? store, approvers: store, configuration: configuration, pushQueue: PushQueue(), audit: audit,
                logger: Logger(label: "broker-test"), now: { clock.now }, readPatience: readPatience)
            try await broker.start()
            return broker
        }

        func events(_ kind: AuditKind) -> [AuditEvent] {
            audit.take().events.filter { $0.kind == kind }
        }
    }

    static func withHarness<T>(_ backend: Backend, _ body: (Harness) async throws -> T) async throws -> T {
        try await withTemporaryDirectory("countersign-broker") { folder in
            let store = try await backend.open(try await backend.newDatabase(in: folder))
            return try await body(Harness(store: store))
        }
    }

    static let requester = RequesterInfo(ip: "203.0.113.7", userAgent: "test")

    @Test(arguments: Backend.available) func ofTwoConcurrentAnswersExactlyOneWins(backend: Backend) async throws {
        try await Self.withHarness(backend) { harness in
            // setup
            let user = try await harness.store.createUser(email: Self.email, passwordHash: "hash")
            let broker = try await harness.broker()
            let (request, code) = try await broker.initiate(email: Self.email, newPasswordHash: "new", requester: Self.requester)
            // act
            let outcomes = await withTaskGroup(of: Result<AnswerOutcome, BrokerError>.self) { group in
                for (index, decision) in [ApprovalDecision.approve, .deny, .approve, .deny].enumerated() {
                    group.addTask {
                        do {
                            let (_, answer) = try await broker.respond(
                                to: request.id, userID: user.id, deviceID: "d\(index)", decision: decision, numberCode: code)
                            return .success(answer)
                        } catch let error as BrokerError {
                            return .failure(error)
                        } catch {
                            return .failure(.notFound)
                        }
                    }
                }
                return await group.reduce(into: []) { $0.append($1) }
            }
            // check
            let winners = outcomes.compactMap { try? $0.get() }
            #expect(winners.count == 1)
            let stored = try #require(try await harness.store.request(id: request.id))
            #expect(stored.state == (winners.first == .approved ? .approved : .denied))
            for case .failure(let error) in outcomes {
                #expect(error == .refused(.conflict(stored.state)))
            }
        }
    }

    @Test(arguments: Backend.available) func theLiveIndexFollowsEachTransition(backend: Backend) async throws {
        try await Self.withHarness(backend) { harness in
            let user = try await harness.store.createUser(email: Self.email, passwordHash: "hash")
            let broker = try await harness.broker()
            let (request, code) = try await broker.initiate(email: Self.email, newPasswordHash: "new", requester: Self.requester)
            #expect(await broker.liveCounts() == [.pending: 1])
            #expect(try await broker.pendingRequests(ofUser: user.id).map(\.id) == [request.id])

            _ = try await broker.respond(to: request.id, userID: user.id, deviceID: "d1", decision: .approve, numberCode: code)
            #expect(await broker.liveCounts() == [.approved: 1])
            #expect(try await broker.pendingRequests(ofUser: user.id).isEmpty)

            _ = try await broker.complete(request.id)
            #expect(await broker.liveCounts().isEmpty)
            #expect(try await broker.status(of: request.id)?.state == .completed)
            #expect(try await harness.store.user(id: user.id)?.passwordHash == "new")
        }
    }

    /// device-keys.md: the stored transition keeps the JWS. A signed answer's
    /// audit event is written in the transition's transaction, so it is in the
    /// database when the answer returns, though no audit writer ever ran here.
    @Test(arguments: Backend.available) func aSignedAnswersProofIsWrittenWithItsTransition(backend: Backend) async throws {
        try await Self.withHarness(backend) { harness in
            let user = try await harness.store.createUser(email: Self.email, passwordHash: "hash")
            let broker = try await harness.broker()
            let (request, code) = try await broker.initiate(email: Self.email, newPasswordHash: "new", requester: Self.requester)
            harness.clock.advance(2)
            let signed = AuditContext(ip: "203.0.113.7", deviceID: "d1", proof: "header.payload.signature", proofKey: #"{"kty":"EC"}"#)
            _ = try await broker.respond(
                to: request.id, userID: user.id, deviceID: "d1", decision: .approve, numberCode: code, keyBound: true, context: signed)
            let stored = try await harness.store.auditEvents(requestRef: request.logReference)
            let answered = try #require(stored.first { $0.kind == .approved }, "\(stored.map(\.kind))")
            #expect(answered.proof == "header.payload.signature")
            #expect(answered.proofKey == #"{"kty":"EC"}"#)
            #expect(answered.deviceID == "d1")
            // Written once: the in-memory log does not hold it a second time.
            let buffered = harness.audit.take().events
            #expect(!buffered.contains { $0.kind == .approved })
            // Once the log is written too, the request's trail reads in time order, though its ids do not.
            try await harness.store.append(buffered)
            let trail = try await harness.store.auditEvents(requestRef: request.logReference).map(\.kind)
            #expect(trail.firstIndex(of: .requestCreated).map { $0 < trail.firstIndex(of: .approved)! } == true, "\(trail)")
            // An unsigned answer's event still goes through the log.
            _ = try await broker.complete(request.id)
            #expect(harness.audit.take().events.contains { $0.kind == .completed })
        }
    }

    /// The broker's memory holds no reset's new password hash, whether the
    /// request was made or reloaded at start; the row holds it until the
    /// request finishes, and completing sets it from there.
    /// About the in-memory index, which only a database one process writes has (SQLite): on PostgreSQL nothing is held.
    @Test func aResetsNewPasswordHashIsHeldInTheDatabaseAlone() async throws {
        try await Self.withHarness(.sqlite) { harness in
            let user = try await harness.store.createUser(email: Self.email, passwordHash: "hash")
            let broker = try await harness.broker()
            let (request, code) = try await broker.initiate(email: Self.email, newPasswordHash: "new", requester: Self.requester)
            #expect(try await broker.status(of: request.id)?.newPasswordHash == nil)
            #expect(try await harness.store.request(id: request.id)?.newPasswordHash == "new")

            _ = try await broker.respond(to: request.id, userID: user.id, deviceID: "d1", decision: .approve, numberCode: code)
            #expect(try await harness.store.request(id: request.id)?.newPasswordHash == "new", "approving kept the held hash")

            // A restart reloads the live requests from the database.
            let restarted = try await harness.broker()
            #expect(try await restarted.status(of: request.id)?.state == .approved)
            #expect(try await restarted.status(of: request.id)?.newPasswordHash == nil)
            _ = try await restarted.complete(request.id)
            #expect(try await harness.store.user(id: user.id)?.passwordHash == "new")
            #expect(try await harness.store.request(id: request.id)?.newPasswordHash == nil)
        }
    }

    /// About the in-memory index, which only a database one process writes has (SQLite): on PostgreSQL nothing is held.
    @Test func aRaceLostToAnotherWriterRefreshesTheIndexFromTheDatabase() async throws {
        try await Self.withHarness(.sqlite) { harness in
            let user = try await harness.store.createUser(email: Self.email, passwordHash: "hash")
            let first = try await harness.broker()
            let (request, code) = try await first.initiate(email: Self.email, newPasswordHash: "new", requester: Self.requester)
            // A second broker on the same file answers first: the first broker's index still says pending.
            let second = try await harness.broker()
            _ = try await second.respond(to: request.id, userID: user.id, deviceID: "d2", decision: .approve, numberCode: code)
            #expect(await first.liveCounts() == [.pending: 1])

            await #expect(throws: BrokerError.refused(.conflict(.approved))) {
                try await first.respond(to: request.id, userID: user.id, deviceID: "d1", decision: .deny, numberCode: nil)
            }
            #expect(await first.liveCounts() == [.approved: 1])
            #expect(try await first.status(of: request.id)?.state == .approved)
        }
    }

    /// A long poll reads its request off the actor, then parks on it: an answer
    /// committed in between (its wake-up found no waiter) must end the wait at
    /// once, not at the timeout. Here the answer lands exactly in that gap.
    /// Waits here are an hour long: reaching the next line at all is the proof
    /// that something other than the timeout ended them (the time limit fails a hang).
    @Test(.timeLimit(.minutes(5)), arguments: Backend.available) func anAnswerBetweenALongPollsReadAndItsParkingIsNotMissed(
        backend: Backend
    ) async throws {
        try await Self.withHarness(backend) { harness in
            let user = try await harness.store.createUser(email: Self.email, passwordHash: "hash")
            let broker = try await harness.broker()
            let (request, code) = try await broker.initiate(email: Self.email, newPasswordHash: "new", requester: Self.requester)
            let read = try #require(try await broker.status(of: request.id))
            #expect(read.state == .pending)
            _ = try await broker.respond(to: request.id, userID: user.id, deviceID: "d", decision: .approve, numberCode: code)
            _ = await broker.park(request.id, until: .now.advanced(by: .seconds(3600)), unlessChangedFrom: read.version)
            #expect(await broker.polls.waiting(on: request.id) == 0)
            #expect(try await broker.waitForChange(of: request.id, timeout: .seconds(3600))?.state == .approved)
        }
    }

    /// After a gap in a cluster's notifications every long poll is woken to read
    /// its request again (``ApprovalBroker/recheckAll()``): one whose request has
    /// not changed parks again, and the change that comes later answers it. (Were
    /// the recheck taken for a change, the poll would end with `pending` and never
    /// park again: the time limit catches that.)
    @Test(.timeLimit(.minutes(5)), arguments: Backend.available) func aRecheckWithNothingChangedLeavesALongPollWaiting(
        backend: Backend
    ) async throws {
        try await Self.withHarness(backend) { harness in
            let user = try await harness.store.createUser(email: Self.email, passwordHash: "hash")
            let broker = try await harness.broker()
            let (request, code) = try await broker.initiate(email: Self.email, newPasswordHash: "new", requester: Self.requester)
            let waiter = Task { try await broker.waitForChange(of: request.id, timeout: .seconds(3600))?.state }
            while await broker.polls.waiting(on: request.id) != 1 { try await Task.sleep(for: .milliseconds(5)) }
            let parkings = await broker.polls.numbersHandedOut
            await broker.recheckAll()
            // Parked again: a second parking, and one waiter.
            while await broker.polls.numbersHandedOut == parkings { try await Task.sleep(for: .milliseconds(5)) }
            while await broker.polls.waiting(on: request.id) != 1 { try await Task.sleep(for: .milliseconds(5)) }
            _ = try await broker.respond(to: request.id, userID: user.id, deviceID: "d", decision: .approve, numberCode: code)
            #expect(try await waiter.value == .approved)
        }
    }

    /// On a shared database a parked poll has its request read once more
    /// (another node's notification may have come between the poll's first
    /// read and its parking). Polls that park while that read is under way
    /// share the one read after it: a change another node commits meanwhile
    /// still wakes them all, and 21 polls parking cost two reads, not 21.
    /// (Without the read queued for the later polls, they wait out their hour:
    /// the time limit fails first.)
    @Test(.timeLimit(.minutes(5)), arguments: Backend.available) func pollsParkedWhileTheirRequestIsReadShareTheNextRead(
        backend: Backend
    ) async throws {
        try await Self.withHarness(backend) { harness in
            // setup: its reads are waited for however long they take (the one held below is not stuck).
            let node = try await ReadThroughNode(harness, readPatience: .seconds(3600))
            let (broker, gated, request, woken) = (node.broker, node.gated, node.request, node.woken)

            // act: the first poll's read after parking is held once it has read the request pending…
            await gated.readReturn.arm()
            let readsBefore = gated.reads
            await node.park()
            await gated.readReturn.waitForArrival()
            // …another node approves it…
            try await node.approveOnAnotherNode()
            // …and 20 more polls park while that read is held: one read is queued for them all.
            for _ in 0..<20 { await node.park() }
            #expect(await broker.rechecksAfterParking[request.id]?.again == true)
            #expect(await broker.rechecksStarted == 1)
            #expect(gated.reads == readsBefore + 1)
            await gated.readReturn.open()

            // check: the queued read sees the approval and wakes every poll, once each.
            while woken.all.count < 21 { try await Task.sleep(for: .milliseconds(5)) }
            while await broker.rechecksAfterParking[request.id] != nil { try await Task.sleep(for: .milliseconds(5)) }
            #expect(woken.all == Array(repeating: .changed, count: 21))
            #expect(gated.reads == readsBefore + 2)
            #expect(await broker.rechecksStarted == 1)
            #expect(await broker.polls.count == 0)
        }
    }

    /// A read after parking that does not end (its query stuck, as on a
    /// connection left half-open by a failover) is not waited for past its
    /// patience: a poll parking then has a read of its own, which sees the
    /// change another node committed and wakes both polls while the stuck read
    /// is still held. (Were the second poll only queued behind the stuck read,
    /// nothing would wake it: the time limit fails first.)
    @Test(.timeLimit(.minutes(5)), arguments: Backend.available) func aStuckReadAfterParkingIsNotWaitedFor(backend: Backend) async throws {
        try await Self.withHarness(backend) { harness in
            // setup
            let node = try await ReadThroughNode(harness, readPatience: .milliseconds(250))
            let (broker, gated, request, woken) = (node.broker, node.gated, node.request, node.woken)

            // act: the first poll's read is held, past its patience…
            await gated.readReturn.arm()
            await node.park()
            await gated.readReturn.waitForArrival()
            try await Task.sleep(for: .milliseconds(500))
            // …another node approves, and a second poll parks.
            try await node.approveOnAnotherNode()
            await node.park()

            // check: both are woken by the second poll's own read, the first still held.
            while woken.all.count < 2 { try await Task.sleep(for: .milliseconds(5)) }
            #expect(woken.all == [.changed, .changed])
            #expect(await broker.rechecksStarted == 2)
            await gated.readReturn.open()
            while await broker.rechecksAfterParking[request.id] != nil { try await Task.sleep(for: .milliseconds(5)) }
        }
    }

    /// Another node's change wakes a request's waiters with the request read
    /// once for them all, after the notification: 20 waiters cost one read, and
    /// each answers from it without reading again; a second notification while
    /// that read is under way starts no other. (Were each woken without it,
    /// the wakes would be `.changed` and each answer a read of its own.)
    @Test(.timeLimit(.minutes(5)), arguments: Backend.available) func anotherNodesChangeWakesItsWaitersWithOneRead(backend: Backend) async throws {
        try await Self.withHarness(backend) { harness in
            // setup: 20 polls parked, their reads after parking done.
            let node = try await ReadThroughNode(harness, readPatience: .seconds(3600))
            let (broker, gated, request, woken) = (node.broker, node.gated, node.request, node.woken)
            for _ in 0..<20 { await node.park() }
            while await broker.rechecksAfterParking[request.id] != nil { try await Task.sleep(for: .milliseconds(5)) }
            try await node.approveOnAnotherNode()
            #expect(woken.all.isEmpty)
            let readsBefore = gated.reads

            // act: the notification of the approval arrives, and another while its read is held.
            await gated.readReturn.arm()
            await broker.changed(request.id)
            await gated.readReturn.waitForArrival()
            await broker.changed(request.id)
            #expect(await broker.readsForWaiters.count == 1)
            await gated.readReturn.open()

            // check: every waiter is woken once, with the one read that saw the approval.
            while woken.all.count < 20 { try await Task.sleep(for: .milliseconds(5)) }
            #expect(gated.reads == readsBefore + 1)
            guard case .read(let read) = woken.all[0] else {
                Issue.record("woken without the read: \(woken.all[0])")
                return
            }
            #expect(read.request?.state == .approved)
            #expect(woken.all == Array(repeating: .read(read), count: 20))
            // An answer after that wake reads nothing more: the requester's own request, as seen now.
            #expect(try await broker.status(of: request.id, wokenBy: woken.all[0])?.state == .approved)
            #expect(try await broker.status(of: request.id, integrationID: "someone-else", wokenBy: woken.all[0]) == nil)
            #expect(gated.reads == readsBefore + 1)
            #expect(await broker.readsForWaiters.isEmpty)
            #expect(await broker.polls.count == 0)
        }
    }

    /// The read for a change's waiters is not waited for past its patience
    /// (its query may be stuck): the waiters are woken without it, and read
    /// on their own. (Were the stuck read waited for, nothing would wake them
    /// while it is held: the time limit fails first.)
    @Test(.timeLimit(.minutes(5)), arguments: Backend.available) func aStuckReadForWaitersIsNotWaitedFor(backend: Backend) async throws {
        try await Self.withHarness(backend) { harness in
            // setup
            let node = try await ReadThroughNode(harness, readPatience: .milliseconds(250))
            let (broker, gated, request, woken) = (node.broker, node.gated, node.request, node.woken)
            for _ in 0..<2 { await node.park() }
            while await broker.rechecksAfterParking[request.id] != nil { try await Task.sleep(for: .milliseconds(5)) }
            try await node.approveOnAnotherNode()

            // act: the read for the waiters is held.
            await gated.readReturn.arm()
            await broker.changed(request.id)
            await gated.readReturn.waitForArrival()

            // check: both are woken without it while it is still held, and its end wakes nothing more.
            while woken.all.count < 2 { try await Task.sleep(for: .milliseconds(5)) }
            #expect(woken.all == [.changed, .changed])
            #expect(await broker.readsForWaiters.isEmpty)
            await gated.readReturn.open()
            // Woken without it, an answer reads for itself.
            #expect(try await broker.status(of: request.id, wokenBy: .changed)?.state == .approved)
        }
    }

    /// Long polls nothing answers end at their own timeouts: one timer serves
    /// every waiter, so a shorter wait parked after a longer one must bring it forward.
    @Test(.timeLimit(.minutes(5)), arguments: Backend.available) func unansweredLongPollsEndAtTheirOwnTimeouts(backend: Backend) async throws {
        try await Self.withHarness(backend) { harness in
            _ = try await harness.store.createUser(email: Self.email, passwordHash: "hash")
            let broker = try await harness.broker()
            let (request, _) = try await broker.initiate(email: Self.email, newPasswordHash: "new", requester: Self.requester)
            // An hour's wait parks first, and arms the timer for its end.
            let long = Task { try await broker.waitForChange(of: request.id, timeout: .seconds(3600))?.state }
            while await broker.polls.waiting(on: request.id) != 1 { try await Task.sleep(for: .milliseconds(5)) }
            let longEnd = try #require(await broker.timeoutTimer?.at)
            // A one-second wait parked after it ends on its own: returning at all means the
            // timer was brought forward (the hour's timer would outlast the time limit).
            let shortState = try await broker.waitForChange(of: request.id, timeout: .seconds(1))?.state
            #expect(shortState == .pending)
            // The hour's wait is still parked, and the timer is armed for it again.
            #expect(await broker.polls.waiting(on: request.id) == 1)
            #expect(await broker.timeoutTimer?.at == longEnd)
            // A caller that goes away leaves no waiter behind.
            long.cancel()
            _ = try? await long.value
            #expect(await broker.polls.count == 0)
        }
    }

    /// A long poll held without a task (``ApprovalBroker/park(_:until:unlessChangedFrom:hangUp:then:)``,
    /// as a connection holds one) hears each of its wake-ups once: the
    /// transition, its timeout, its client hanging up (whose action is then
    /// dropped), the server draining; and at once when the request moved on
    /// before it parked or the server drains already.
    @Test(.timeLimit(.minutes(5)), arguments: Backend.available) func aLongPollHeldWithoutATaskIsWokenOnceByEachWakeUp(
        backend: Backend
    ) async throws {
        try await Self.withHarness(backend) { harness in
            let user = try await harness.store.createUser(email: Self.email, passwordHash: "hash")
            let broker = try await harness.broker()
            let (request, code) = try await broker.initiate(email: Self.email, newPasswordHash: "new", requester: Self.requester)
            let version = try #require(try await broker.status(of: request.id)).version
            let (wakes, heard) = AsyncStream.makeStream(of: (String, LongPollWake).self)
            func park(
                _ name: String, until deadline: ContinuousClock.Instant = .now.advanced(by: .seconds(3600)), hangUp: HangUpActions? = nil
            )
                async
            {
                await broker.park(request.id, until: deadline, unlessChangedFrom: version, hangUp: hangUp) { heard.yield((name, $0)) }
            }
            var iterator = wakes.makeAsyncIterator()
            // A transition committed here wakes with the request as committed on a shared
            // database (PostgreSQL), where each poll would otherwise read it again.
            let woken = harness.store.isShared ? "read approved" : "changed"

            // Its timeout: an instant already past is due when the timer runs.
            await park("timed out", until: .now)
            #expect(await iterator.next().map { "\($0.0) \($0.1)" } == "timed out stopped")

            // Its client hanging up.
            let hangUp = HangUpActions()
            await park("hung up", hangUp: hangUp)
            hangUp.hangUp()
            #expect(await iterator.next().map { "\($0.0) \($0.1)" } == "hung up stopped")

            // The transition wakes every poll of the request, each once; the
            // action a poll left with its connection's hang-up is dropped.
            let connection = HangUpActions()
            await park("first", hangUp: connection)
            await park("second")
            #expect(await broker.polls.waiting(on: request.id) == 2)
            #expect(connection.registered == 1)
            _ = try await broker.respond(to: request.id, userID: user.id, deviceID: "d", decision: .approve, numberCode: code)
            let changed = [await iterator.next(), await iterator.next()].compactMap { $0 }.map { "\($0.0) \(Self.describe($0.1))" }.sorted()
            #expect(changed == ["first \(woken)", "second \(woken)"])
            #expect(await broker.polls.count == 0)
            #expect(connection.registered == 0)

            // Parked after the request moved on: at once.
            await park("late")
            #expect(await iterator.next().map { "\($0.0) \($0.1)" } == "late changed")

            // Draining: a poll parked on a pending request is answered, and a later one at once.
            let (pending, _) = try await broker.initiate(email: Self.email, newPasswordHash: "newer", requester: Self.requester)
            let pendingVersion = try #require(try await broker.status(of: pending.id)).version
            await broker.park(pending.id, until: .now.advanced(by: .seconds(3600)), unlessChangedFrom: pendingVersion, hangUp: nil) {
                heard.yield(("drained", $0))
            }
            await broker.drain()
            #expect(await iterator.next().map { "\($0.0) \($0.1)" } == "drained stopped")
            await broker.park(pending.id, until: .now.advanced(by: .seconds(3600)), unlessChangedFrom: pendingVersion, hangUp: nil) {
                heard.yield(("after drain", $0))
            }
            #expect(await iterator.next().map { "\($0.0) \($0.1)" } == "after drain stopped")

            // Nothing woke twice: the next thing heard is the end.
            heard.finish()
            #expect(await iterator.next() == nil)
        }
    }

    /// A wake-up as a test reads it: with the state of the request it carries, if it carries one.
    static func describe(_ why: LongPollWake) -> String {
        guard case .read(let read) = why else { return "\(why)" }
        return "read \(read.request?.state.rawValue ?? "gone")"
    }

    @Test(.timeLimit(.minutes(5)), arguments: Backend.available) func aNewRequestSupersedesThePendingOneAndWakesItsLongPoll(
        backend: Backend
    ) async throws {
        try await Self.withHarness(backend) { harness in
            _ = try await harness.store.createUser(email: Self.email, passwordHash: "hash")
            let broker = try await harness.broker()
            let (old, _) = try await broker.initiate(email: Self.email, newPasswordHash: "new", requester: Self.requester)
            // An hour's wait: only the wake-up can end it within the time limit.
            let waiter = Task { try await broker.waitForChange(of: old.id, timeout: .seconds(3600)) }
            // Let the long poll register before the new request arrives.
            while await broker.polls.waiting(on: old.id) == 0 { try await Task.sleep(for: .milliseconds(5)) }

            let (new, _) = try await broker.initiate(email: Self.email, newPasswordHash: "newer", requester: Self.requester)
            // Woken inside the supersede's commit.
            #expect(await broker.polls.waiting(on: old.id) == 0)
            let woken = try await waiter.value
            #expect(woken?.state == .cancelled)
            #expect(try await harness.store.request(id: old.id)?.state == .cancelled)
            #expect(try await broker.status(of: new.id)?.state == .pending)
            let cancelled = harness.events(.cancelled)
            #expect(cancelled.map(\.requestRef) == [old.logReference])
            #expect(cancelled.first?.detail == "superseded by a newer request")
        }
    }

    @Test(arguments: Backend.available) func anAnswerAfterTheDeadlineWritesTheTimeOutAndIsRefused(backend: Backend) async throws {
        try await Self.withHarness(backend) { harness in
            let user = try await harness.store.createUser(email: Self.email, passwordHash: "hash")
            let broker = try await harness.broker(configuration: BrokerConfiguration(requestTTL: 60))
            let (request, code) = try await broker.initiate(email: Self.email, newPasswordHash: "new", requester: Self.requester)
            harness.clock.advance(61)
            await #expect(throws: BrokerError.refused(.expired)) {
                try await broker.respond(to: request.id, userID: user.id, deviceID: "d1", decision: .approve, numberCode: code)
            }
            // Written at once, not left to the sweeper.
            #expect(try await harness.store.request(id: request.id)?.state == .expired)
            #expect(await broker.liveCounts().isEmpty)
        }
    }

    @Test(arguments: Backend.available) func aFraudReportSilencesPromptsFromTheMomentOfTheAnswer(backend: Backend) async throws {
        try await Self.withHarness(backend) { harness in
            let user = try await harness.store.createUser(email: Self.email, passwordHash: "hash")
            let broker = try await harness.broker(configuration: BrokerConfiguration(fraudSilence: 600))
            let (request, _) = try await broker.initiate(email: Self.email, newPasswordHash: "new", requester: Self.requester)
            harness.clock.advance(5)
            let answeredAt = harness.clock.now
            let (denied, answer) = try await broker.respond(
                to: request.id, userID: user.id, deviceID: "d1", decision: .deny, numberCode: nil, reportFraud: true)
            #expect(answer == .denied)
            #expect(denied.state == .denied)
            #expect(try await harness.store.user(id: user.id)?.silencedUntil == answeredAt.addingTimeInterval(600))

            // While silenced, a new request is for nobody's devices.
            let (silenced, _) = try await broker.initiate(email: Self.email, newPasswordHash: "new", requester: Self.requester)
            #expect(silenced.recipient == .silenced(userID: user.id))
            #expect(silenced.userID == nil)
            #expect(try await broker.pendingRequests(ofUser: user.id).isEmpty)
            let events = harness.audit.take().events
            #expect(events.contains { $0.kind == .fraudReported && $0.userID == user.id })
            #expect(events.contains { $0.kind == .promptSuppressed && $0.userID == user.id })

            // After the silence, prompts resume.
            harness.clock.advance(601)
            let (prompted, _) = try await broker.initiate(email: Self.email, newPasswordHash: "new", requester: Self.requester)
            #expect(prompted.recipient == .user(id: user.id))
        }
    }

    @Test(arguments: Backend.available) func anUnknownEmailGetsARequestNoDeviceCanSee(backend: Backend) async throws {
        try await Self.withHarness(backend) { harness in
            let broker = try await harness.broker()
            let (request, code) = try await broker.initiate(email: "nobody@example.com", newPasswordHash: "new", requester: Self.requester)
            #expect(code != nil)
            #expect(request.userID == nil)
            #expect(request.recipient == .unknownEmail(emailHash: SecureToken.sha256Hex("nobody@example.com")))
            #expect(try await broker.status(of: request.id)?.state == .pending)
            // Stored and read back, the recipient is the same.
            #expect(try await harness.store.request(id: request.id)?.recipient == request.recipient)
        }
    }

    // MARK: Interleavings the actor allows at its suspension points

    @Test(.timeLimit(.minutes(5)), arguments: Backend.available) func aSupersedeThatBeatsAnAnswerStillCancelsWakesAndAudits(
        backend: Backend
    ) async throws {
        try await Self.withHarness(backend) { harness in
            // setup
            let user = try await harness.store.createUser(email: Self.email, passwordHash: "hash")
            let gated = GatedStore(harness.store)
            let broker = try await harness.broker(approvals: gated)
            let (old, code) = try await broker.initiate(email: Self.email, newPasswordHash: "new", requester: Self.requester)
            // An hour's wait, so that waking at its end cannot pass for the wake-up below (the time limit fails first).
            let waiter = Task { try await broker.waitForChange(of: old.id, timeout: .seconds(3600)) }
            while await broker.polls.waiting(on: old.id) == 0 { try await Task.sleep(for: .milliseconds(5)) }

            // act: the new request's insert commits (cancelling the old one) and is held before it returns…
            await gated.insertReturn.arm()
            let newer = Task { try await broker.initiate(email: Self.email, newPasswordHash: "newer", requester: Self.requester) }
            await gated.insertReturn.waitForArrival()
            // …so an answer on the old request loses in the database first.
            await #expect(throws: BrokerError.refused(.conflict(.cancelled))) {
                try await broker.respond(to: old.id, userID: user.id, deviceID: "d1", decision: .approve, numberCode: code)
            }
            await gated.insertReturn.open()
            _ = try await newer.value

            // check: the long poll woke at once, and the supersede was audited.
            #expect(try await waiter.value?.state == .cancelled)
            let cancelled = harness.events(.cancelled)
            #expect(cancelled.map(\.requestRef) == [old.logReference])
            #expect(cancelled.first?.detail == "superseded by a newer request")
        }
    }

    @Test(arguments: Backend.available) func anApprovalDecidedBeforeTheDeadlineButWrittenAfterItIsRefused(backend: Backend) async throws {
        try await Self.withHarness(backend) { harness in
            let user = try await harness.store.createUser(email: Self.email, passwordHash: "hash")
            let gated = GatedStore(harness.store)
            let broker = try await harness.broker(configuration: BrokerConfiguration(requestTTL: 60), approvals: gated)
            let (request, code) = try await broker.initiate(email: Self.email, newPasswordHash: "new", requester: Self.requester)
            // Decided one second before the deadline, then waiting for the writer past it.
            harness.clock.advance(59)
            await gated.applyStart.arm()
            let late = Task { try await broker.respond(to: request.id, userID: user.id, deviceID: "d1", decision: .approve, numberCode: code) }
            await gated.applyStart.waitForArrival()
            harness.clock.advance(2)
            await gated.applyStart.open()
            await #expect(throws: BrokerError.refused(.expired)) { try await late.value }
            #expect(try await harness.store.request(id: request.id)?.state == .pending)
            #expect(try await broker.status(of: request.id)?.state == .expired)
        }
    }

    @Test(arguments: Backend.available) func aStaleReadAfterALostRaceDoesNotUndoANewerTransition(backend: Backend) async throws {
        try await Self.withHarness(backend) { harness in
            // setup
            let user = try await harness.store.createUser(email: Self.email, passwordHash: "hash")
            let gated = GatedStore(harness.store)
            let broker = try await harness.broker(approvals: gated)
            let (request, code) = try await broker.initiate(email: Self.email, newPasswordHash: "new", requester: Self.requester)

            // act: a denial is held just before its write…
            await gated.applyStart.arm()
            let loser = Task { try await broker.respond(to: request.id, userID: user.id, deviceID: "d2", decision: .deny, numberCode: nil) }
            await gated.applyStart.waitForArrival()
            // …while an approval wins;
            _ = try await broker.respond(to: request.id, userID: user.id, deviceID: "d1", decision: .approve, numberCode: code)
            // the denial's write then fails, and its re-read (approved) is held…
            await gated.readReturn.arm()
            await gated.applyStart.open()
            await gated.readReturn.waitForArrival()
            // …while the requester completes.
            _ = try await broker.complete(request.id)
            await gated.readReturn.open()
            await #expect(throws: BrokerError.refused(.conflict(.completed))) { try await loser.value }

            // check: the stale approved copy did not come back.
            #expect(try await broker.status(of: request.id)?.state == .completed)
            #expect(await broker.liveCounts().isEmpty)
        }
    }
}

/// A node of a cluster in a broker test: it reads through (as on a shared
/// database), hears of no other node's commits, and holds long polls on one
/// pending request, recording how each woke.
struct ReadThroughNode {
    let harness: ApprovalBrokerTests.Harness
    let gated: GatedStore
    let broker: ApprovalBroker
    let user: User
    let request: ApprovalRequest
    let code: String?
    let version: Int
    /// How each poll woke, in order.
    let woken = Wakes()

    final class Wakes: Sendable {
        private let list = Mutex<[LongPollWake]>([])
        func append(_ why: LongPollWake) { list.withLock { $0.append(why) } }
        var all: [LongPollWake] { list.withLock { $0 } }
    }

    init(_ harness: ApprovalBrokerTests.Harness, readPatience: Duration) async throws {
        self.harness = harness
        user = try await harness.store.createUser(email: ApprovalBrokerTests.email, passwordHash: "hash")
        gated = GatedStore(harness.store, shared: true)
        broker = try await harness.broker(approvals: gated, readPatience: readPatience)
        (request, code) = try await broker.initiate(
            email: ApprovalBrokerTests.email, newPasswordHash: "new", requester: ApprovalBrokerTests.requester)
        version = try #require(try await broker.pendingVersion(of: request.id, integrationID: nil))
    }

    /// Parks one more poll for an hour.
    func park() async {
        let woken = woken
        await broker.park(request.id, until: .now.advanced(by: .seconds(3600)), unlessChangedFrom: version, hangUp: nil) { why in
            woken.append(why)
        }
    }

    /// Another node approves the request: this one hears nothing of it.
    func approveOnAnotherNode() async throws {
        let otherNode = try await harness.broker(approvals: GatedStore(harness.store, shared: true))
        _ = try await otherNode.respond(to: request.id, userID: user.id, deviceID: "d", decision: .approve, numberCode: code)
    }
}

/// An approval store whose calls can be held at one point each, to interleave
/// two broker operations exactly where the actor may suspend.
final class GatedStore: ApprovalStore {
    let base: any CountersignStorage
    /// Holds `insert` after its transaction committed, before it returns.
    let insertReturn = Gate()
    /// Holds `apply` before its transaction.
    let applyStart = Gate()
    /// Holds `request(id:)` after its read, before it returns.
    let readReturn = Gate()
    /// Reads as if other nodes shared the database (the broker then keeps nothing in memory).
    private let shared: Bool?
    private let readCount = Mutex(0)

    init(_ base: any CountersignStorage, shared: Bool? = nil) {
        self.base = base
        self.shared = shared
    }

    /// Calls of `request(id:)` so far.
    var reads: Int { readCount.withLock { $0 } }

    func insert(
        _ request: ApprovalRequest, idempotency: IdempotencyRecord?, supersededEvent: @escaping @Sendable (Supersession) -> OutboxItem?
    ) async throws -> [Supersession] {
        let superseded = try await base.insert(request, idempotency: idempotency, supersededEvent: supersededEvent)
        await insertReturn.pass()
        return superseded
    }

    func request(id: String) async throws -> ApprovalRequest? {
        readCount.withLock { $0 += 1 }
        let request = try await base.request(id: id)
        await readReturn.pass()
        return request
    }

    func liveRequests(_ body: @escaping @Sendable ([ApprovalRequest]) -> Void) async throws { try await base.liveRequests(body) }
    func pendingRequests(userID: String, now: Date) async throws -> [ApprovalRequest] { try await base.pendingRequests(userID: userID, now: now) }
    func dueRequests(now: Date, limit: Int) async throws -> [ApprovalRequest] { try await base.dueRequests(now: now, limit: limit) }
    func liveCounts() async throws -> [ApprovalState: Int] { try await base.liveCounts() }
    var isShared: Bool { shared ?? base.isShared }

    func apply(
        _ transition: Transition, to request: ApprovalRequest, event: OutboxItem?, audit: AuditEvent?,
        writeTime: @escaping @Sendable () -> Date
    ) async throws -> Bool {
        await applyStart.pass()
        return try await base.apply(transition, to: request, event: event, audit: audit, writeTime: writeTime)
    }
}

/// Once armed, holds the next caller of ``pass()`` until ``open()``.
actor Gate {
    private var armed = false
    private var held: [CheckedContinuation<Void, Never>] = []
    private var watchers: [CheckedContinuation<Void, Never>] = []

    func arm() { armed = true }

    func pass() async {
        guard armed else { return }
        armed = false
        await withCheckedContinuation { continuation in
            held.append(continuation)
            for watcher in watchers { watcher.resume() }
            watchers = []
        }
    }

    /// Returns once a caller is held.
    func waitForArrival() async {
        guard held.isEmpty else { return }
        await withCheckedContinuation { watchers.append($0) }
    }

    func open() {
        for continuation in held { continuation.resume() }
        held = []
    }
}

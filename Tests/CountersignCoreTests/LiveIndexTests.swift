import Foundation
import Testing

@testable import CountersignCore

/// The broker's index answers the sweep, a device's pending list and the
/// counts from what it keeps beside the requests, not by reading them all:
/// each answer must still be what a scan of the requests held would give.
@Suite struct LiveIndexTests {
    static let t0 = Date(timeIntervalSince1970: 1_800_000_000)

    static func request(_ id: String, user: String?, expiresIn seconds: TimeInterval, state: ApprovalState = .pending) -> ApprovalRequest {
        ApprovalRequest(
            id: id, userID: user, subject: user ?? "unknown:\(id)", action: .passwordReset, state: state,
            createdAt: t0, expiresAt: t0.addingTimeInterval(seconds), completionWindow: 120,
            completeBy: state == .approved ? t0.addingTimeInterval(seconds + 120) : nil,
            updatedAt: t0, numberCode: nil, newPasswordHash: "$2b$hash",
            requester: RequesterInfo(ip: "203.0.113.7", userAgent: nil))
    }

    @Test func theSweepFindsWhatIsDueSoonestFirstAndAgainUntilItLeaves() {
        let index = LiveIndex()
        index.load([Self.request("c", user: "u1", expiresIn: 30), Self.request("a", user: "u1", expiresIn: 10)])
        index.mirror(Self.request("b", user: nil, expiresIn: 20))
        #expect(index.due(at: Self.t0.addingTimeInterval(9)).isEmpty)
        #expect(index.due(at: Self.t0.addingTimeInterval(20)).map(\.id) == ["a", "b"])
        // Nothing was written for them: the next sweep finds them again, once each.
        #expect(index.due(at: Self.t0.addingTimeInterval(25)).map(\.id) == ["a", "b"])
        // "a" expired (it leaves), "b" was erased (forgotten): neither is due any more.
        var expired = Self.request("a", user: "u1", expiresIn: 10)
        expired.state = .expired
        index.mirror(expired)
        index.forget("b")
        #expect(index.due(at: Self.t0.addingTimeInterval(25)).isEmpty)
        #expect(index.due(at: Self.t0.addingTimeInterval(31)).map(\.id) == ["c"])
        #expect(index["c"]?.newPasswordHash == nil)
    }

    @Test func aRequestWhoseDeadlineMovedIsDueAtItsNewDeadlineOnly() {
        let index = LiveIndex()
        index.mirror(Self.request("r", user: "u1", expiresIn: 10))
        // Approved at once: its deadline is now the end of the completion window (130 s).
        index.mirror(Self.request("r", user: "u1", expiresIn: 10, state: .approved))
        #expect(index.due(at: Self.t0.addingTimeInterval(60)).isEmpty)
        #expect(index.due(at: Self.t0.addingTimeInterval(130)).map(\.state) == [.approved])
        // Mirrored again unchanged (a refresh), and forgotten then mirrored again: still found once.
        index.mirror(Self.request("r", user: "u1", expiresIn: 10, state: .approved))
        index.forget("r")
        index.mirror(Self.request("r", user: "u1", expiresIn: 10, state: .approved))
        #expect(index.due(at: Self.t0.addingTimeInterval(200)).map(\.id) == ["r"])
    }

    /// Finished requests leave their deadline entries behind until those pass; with an
    /// hour's TTL and many creates a second that would grow without bound.
    @Test func entriesLeftByFinishedRequestsAreBounded() {
        let index = LiveIndex()
        index.mirror(Self.request("kept", user: nil, expiresIn: 3600))
        for number in 0..<5000 {
            var request = Self.request("r\(number)", user: nil, expiresIn: 3600)
            index.mirror(request)
            request.state = .cancelled
            index.mirror(request)
        }
        #expect(index.count == 1)
        #expect(index.deadlineEntries <= 2 * 1 + 1024 + 1)
        #expect(index.due(at: Self.t0.addingTimeInterval(3600)).map(\.id) == ["kept"])
    }

    @Test func aUsersRequestsAndTheCountsFollowEachChange() {
        let index = LiveIndex()
        index.load([
            Self.request("a", user: "u1", expiresIn: 60), Self.request("b", user: "u2", expiresIn: 60),
            Self.request("c", user: nil, expiresIn: 60),
        ])
        index.mirror(Self.request("d", user: "u1", expiresIn: 60, state: .approved))
        #expect(Set(index.requests(ofUser: "u1").map(\.id)) == ["a", "d"])
        #expect(index.requests(ofUser: "u2").map(\.id) == ["b"])
        #expect(index.countsByState() == [.pending: 3, .approved: 1])

        index.mirror(Self.request("a", user: "u1", expiresIn: 60, state: .approved))
        #expect(index.countsByState() == [.pending: 2, .approved: 2])
        #expect(Set(index.requests(ofUser: "u1").map(\.id)) == ["a", "d"])

        var completed = Self.request("d", user: "u1", expiresIn: 60, state: .approved)
        completed.state = .completed
        index.mirror(completed)
        index.forget("b")
        index.forget("b")
        #expect(index.requests(ofUser: "u1").map(\.id) == ["a"])
        #expect(index.requests(ofUser: "u2").isEmpty)
        #expect(index.countsByState() == [.pending: 1, .approved: 1])
        #expect(index.count == 2)
    }
}

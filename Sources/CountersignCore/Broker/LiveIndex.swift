import Foundation
import Synchronization

/// The broker's pending and approved requests, by id. Only the broker writes,
/// on its actor after each commit; readers look a request up under the lock
/// without queueing on the actor behind other work.
///
/// Each request is held in a box: a dictionary keeps its values inline in
/// buckets of which up to half stand empty, and a request is some 300 bytes,
/// so inline values would cost more than the requests themselves.
final class LiveIndex: Sendable {
    private final class Box: Sendable {
        let request: ApprovalRequest

        /// Holds what reads and transitions need. A reset's new password
        /// hash stays in the database alone: no transition reads it from
        /// here, and the one that sets it (completing) reads it from the
        /// row in its own transaction.
        init(_ request: ApprovalRequest) {
            var held = request
            held.newPasswordHash = nil
            self.request = held
        }
    }

    private let requests = Mutex<[String: Box]>([:])

    subscript(id: String) -> ApprovalRequest? {
        requests.withLock { $0[id]?.request }
    }

    var count: Int { requests.withLock { $0.count } }

    /// Holds `request` while it is live, forgets it once it has finished.
    func mirror(_ request: ApprovalRequest) {
        let box = request.state.isLive ? Box(request) : nil
        requests.withLock { $0[request.id] = box }
    }

    func forget(_ id: String) {
        requests.withLock { $0[id] = nil }
    }

    func load(_ loaded: [ApprovalRequest]) {
        let boxes = loaded.map(Box.init)
        requests.withLock { requests in
            requests.reserveCapacity(requests.count + boxes.count)
            for box in boxes { requests[box.request.id] = box }
        }
    }

    /// The requests whose deadline (expiry, or the end of the completion
    /// window) is at or before `now`.
    func due(at now: Date) -> [ApprovalRequest] {
        filter { ($0.deadline ?? .distantFuture) <= now }
    }

    /// The requests `isIncluded` accepts. Each is tested in place; only those
    /// accepted are copied out (a copy of every request made the expiry sweep
    /// a twelfth of the daemon's time at 200k live).
    func filter(_ isIncluded: (ApprovalRequest) -> Bool) -> [ApprovalRequest] {
        requests.withLock { requests in
            var accepted: [ApprovalRequest] = []
            for box in requests.values where isIncluded(box.request) { accepted.append(box.request) }
            return accepted
        }
    }

    func countsByState() -> [ApprovalState: Int] {
        requests.withLock { $0.values.reduce(into: [:]) { counts, box in counts[box.request.state, default: 0] += 1 } }
    }
}

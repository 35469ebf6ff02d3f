import Synchronization

/// The broker's pending and approved requests, by id. Only the broker writes,
/// on its actor after each commit; readers look a request up under the lock
/// without queueing on the actor behind other work.
final class LiveIndex: Sendable {
    private let requests = Mutex<[String: ApprovalRequest]>([:])

    subscript(id: String) -> ApprovalRequest? {
        requests.withLock { $0[id] }
    }

    var count: Int { requests.withLock { $0.count } }

    /// Holds `request` while it is live, forgets it once it has finished.
    func mirror(_ request: ApprovalRequest) {
        requests.withLock { $0[request.id] = request.state.isLive ? request : nil }
    }

    func load(_ loaded: [ApprovalRequest]) {
        requests.withLock { requests in
            requests.reserveCapacity(requests.count + loaded.count)
            for request in loaded { requests[request.id] = request }
        }
    }

    func filter(_ isIncluded: (ApprovalRequest) -> Bool) -> [ApprovalRequest] {
        requests.withLock { $0.values.filter(isIncluded) }
    }

    func countsByState() -> [ApprovalState: Int] {
        requests.withLock { $0.values.reduce(into: [:]) { counts, request in counts[request.state, default: 0] += 1 } }
    }
}

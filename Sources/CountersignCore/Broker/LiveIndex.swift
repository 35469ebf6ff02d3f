import Foundation
import HeapModule
import Synchronization

/// The broker's pending and approved requests, by id. Only the broker writes,
/// on its actor after each commit; readers look a request up under the lock
/// without queueing on the actor behind other work.
///
/// Beside the requests it keeps what the frequent questions need, so that none
/// of them reads every request: their deadlines in order (the expiry sweep,
/// four times a second), the ids of each user's (a device's pending list) and
/// counts by state (metrics). With a million live requests a scan of them all
/// took a fifth of a second of a core, and the sweep alone made four a second.
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

    /// A request's deadline as it was when the entry was made. An entry is
    /// not removed when its request moves on or leaves: one whose request no
    /// longer has that deadline is dropped when the sweep reaches it.
    private struct Deadline: Comparable {
        let at: Date
        let id: String

        static func < (lhs: Deadline, rhs: Deadline) -> Bool { lhs.at < rhs.at }
    }

    /// A request's id with its hash, worked out once: the table compares the
    /// hashes before the ids, and grows without hashing any id again (with a
    /// million ids, reading each one's bytes at every probe and every growth
    /// was most of the load's time under the lock).
    private struct Key: Hashable {
        let id: String
        let hash: Int

        init(_ id: String) {
            self.id = id
            hash = id.hashValue
        }

        static func == (lhs: Key, rhs: Key) -> Bool { lhs.hash == rhs.hash && lhs.id == rhs.id }
        func hash(into hasher: inout Hasher) { hasher.combine(hash) }
    }

    private struct State {
        var requests: [Key: Box] = [:]
        var deadlines = Heap<Deadline>()
        /// Ids of each user's live requests (a user has few: their limits bound them).
        var byUser: [String: [String]] = [:]
        var counts: [ApprovalState: Int] = [:]

        mutating func put(_ box: Box) {
            let request = box.request
            let old = requests.updateValue(box, forKey: Key(request.id))?.request
            if let old { leave(old) }
            counts[request.state, default: 0] += 1
            if let userID = request.userID, old?.userID != userID { byUser[userID, default: []].append(request.id) }
            if let deadline = request.deadline, deadline != old?.deadline {
                deadlines.insert(Deadline(at: deadline, id: request.id))
                compactIfStale()
            }
        }

        /// Entries left behind by requests that finished or moved on wait for
        /// their deadline, which a long `--request-ttl` sets far off: once
        /// they outnumber the requests, the heap is rebuilt from the requests
        /// (linear, and at most once per as many insertions as it holds).
        private mutating func compactIfStale() {
            guard deadlines.count > 2 * requests.count + 1024 else { return }
            deadlines = Heap(requests.values.compactMap { box in box.request.deadline.map { Deadline(at: $0, id: box.request.id) } })
        }

        mutating func remove(_ id: String) {
            guard let old = requests.removeValue(forKey: Key(id))?.request else { return }
            leave(old)
            if let userID = old.userID {
                byUser[userID]?.removeAll { $0 == id }
                if byUser[userID]?.isEmpty == true { byUser[userID] = nil }
            }
        }

        /// Takes `old` out of the counts (its user's list and its deadline entry stay until removed or dropped).
        private mutating func leave(_ old: ApprovalRequest) {
            counts[old.state, default: 0] -= 1
            if counts[old.state] == 0 { counts[old.state] = nil }
        }
    }

    private let state = Mutex(State())

    subscript(id: String) -> ApprovalRequest? {
        let key = Key(id)
        return state.withLock { $0.requests[key]?.request }
    }

    var count: Int { state.withLock { $0.requests.count } }

    /// Entries in the order of deadlines, stale ones included.
    var deadlineEntries: Int { state.withLock { $0.deadlines.count } }

    /// Holds `request` while it is live, forgets it once it has finished.
    func mirror(_ request: ApprovalRequest) {
        guard request.state.isLive else { return forget(request.id) }
        let box = Box(request)
        state.withLock { $0.put(box) }
    }

    func forget(_ id: String) {
        state.withLock { $0.remove(id) }
    }

    /// Adds a batch read from the database (boxed outside the lock).
    func load(_ loaded: [ApprovalRequest]) {
        let boxes = loaded.map(Box.init)
        state.withLock { state in
            for box in boxes { state.put(box) }
        }
    }

    /// The requests whose deadline (expiry, or the end of the completion
    /// window) is at or before `now`, soonest first. They stay in the order of
    /// deadlines until they leave memory: a sweep whose write did not land
    /// finds them again.
    func due(at now: Date) -> [ApprovalRequest] {
        state.withLock { state in
            var due: [ApprovalRequest] = []
            var kept: [Deadline] = []
            var seen: Set<String> = []
            while let next = state.deadlines.min, next.at <= now {
                let entry = state.deadlines.removeMin()
                guard let request = state.requests[Key(entry.id)]?.request, request.deadline == entry.at, seen.insert(entry.id).inserted
                else {
                    continue
                }
                due.append(request)
                kept.append(entry)
            }
            for entry in kept { state.deadlines.insert(entry) }
            return due
        }
    }

    /// The live requests of user `userID`.
    func requests(ofUser userID: String) -> [ApprovalRequest] {
        state.withLock { state in
            (state.byUser[userID] ?? []).compactMap { state.requests[Key($0)]?.request }.filter { $0.userID == userID }
        }
    }

    func countsByState() -> [ApprovalState: Int] {
        state.withLock { $0.counts }
    }
}

import Foundation

/// The broker's one reader of live requests. On a database only this process
/// writes, it keeps them in memory (``LiveIndex``), mirroring every commit;
/// on a database a cluster shares, other nodes change them too, so it keeps
/// nothing and reads the database each time. The broker asks the same
/// questions either way; only this type knows which it is.
final class LiveRequests: Sendable {
    /// `nil`: the database is shared, read through.
    private let index: LiveIndex?
    private let store: any ApprovalStore
    /// Read through, the reads of one request asked for together share a
    /// query: polls parking together, or woken without their request, cost
    /// about one query per round trip, not one each.
    private let reads: SharedReads<ApprovalRequest?>

    /// How long a read under way is waited for before a caller reads on its own (``SharedReads``).
    let patience: Duration

    init(store: any ApprovalStore, patience: Duration) {
        self.store = store
        self.patience = patience
        index = store.isShared ? nil : LiveIndex()
        reads = SharedReads(patience: patience) { [store] id in try await store.request(id: id) }
    }

    /// Whether other processes change requests too (nothing is held here).
    var readsThrough: Bool { index == nil }

    /// Loads the live requests into memory; how many, or `nil` when nothing is held.
    func load() async throws -> Int? {
        guard let index else { return nil }
        try await store.liveRequests { index.load($0) }
        return index.count
    }

    /// Live requests whose deadline has passed at `now` (on a shared database, a batch of them).
    func due(at now: Date) async throws -> [ApprovalRequest] {
        guard let index else { return try await store.dueRequests(now: now, limit: 1000) }
        return index.due(at: now)
    }

    /// Counts of live requests by state.
    func counts() async throws -> [ApprovalState: Int] {
        guard let index else { return try await store.liveCounts() }
        return index.countsByState()
    }

    /// Pending requests of a user at `now`, newest first.
    func pending(ofUser userID: String, at now: Date) async throws -> [ApprovalRequest] {
        guard let index else { return try await store.pendingRequests(userID: userID, now: now) }
        return
            index
            .requests(ofUser: userID)
            .filter { ApprovalStateMachine($0).state(at: now) == .pending }
            .sorted { $0.createdAt > $1.createdAt }
    }

    /// The copy held in memory, without waiting for anything; `nil` when none is (finished, unknown, or read through).
    func held(_ id: String) -> ApprovalRequest? {
        index?[id]
    }

    /// Request `id` as stored: the copy held, else the database's (junk ids never reach it).
    func request(_ id: String) async throws -> ApprovalRequest? {
        if let held = index?[id] { return held }
        guard SecureToken.isWellFormed(id) else { return nil }
        return try await reads.value(of: id)
    }

    /// Request `id` as stored, read in a query of its own: not shared with
    /// other reads of it, nor joining one under way (``SharedReads``).
    func requestAlone(_ id: String) async throws -> ApprovalRequest? {
        if let held = index?[id] { return held }
        guard SecureToken.isWellFormed(id) else { return nil }
        return try await store.request(id: id)
    }

    /// Mirrors a committed request (a finished one leaves memory).
    func mirror(_ request: ApprovalRequest) {
        index?.mirror(request)
    }

    /// Mirrors a row read after a lost race, only if it is newer than the copy
    /// held. A request no longer held has finished here (its terminal
    /// transition removed it), so a live-looking row for it is stale.
    func refresh(with stored: ApprovalRequest) {
        guard let index, let held = index[stored.id], stored.version > held.version else { return }
        index.mirror(stored)
    }

    /// Forgets request `id`: its row is gone (its user erased, by another process or while a
    /// write of this one was under way), so nothing may act on the copy held.
    func forget(_ id: String) {
        index?.forget(id)
    }

    /// Whether request `id` has moved past `version` here (finished requests
    /// leave memory). Read through, nothing tells: the cluster's notifications do.
    func hasMoved(_ id: String, pastVersion version: Int) -> Bool {
        guard let index else { return false }
        return index[id]?.version != version
    }
}

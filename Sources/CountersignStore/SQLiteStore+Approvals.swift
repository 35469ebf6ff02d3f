import CountersignCore
import CountersignSQL
import Foundation
import GRDB

extension SQLiteStore: ApprovalStore {
    public func insert(
        _ request: ApprovalRequest, idempotency: IdempotencyRecord?, supersededEvent: @escaping @Sendable (Supersession) -> OutboxItem?
    ) async throws -> [Supersession] {
        // The statements are written out before the writer takes them: it is the one thread every write waits for.
        let insert = ApprovalSQL.insert(request, prompt: try request.prompt?.storedJSON())
        let supersedable = ApprovalSQL.supersedable(by: request, .sqlite)
        let now = request.createdAt
        return try await group.write { db in
            if let idempotency {
                try db.perform(ApprovalSQL.forgetStaleKey(idempotency))
                if try db.perform(ApprovalSQL.insertKey(idempotency, at: now)) == 0 { throw IdempotencyKeyTaken() }
            }
            var superseded: [Supersession] = []
            for row in try db.fetch(supersedable) {
                let old = try ApprovalRequest(row: row)
                guard let cancelled = Supersession.of(old, at: now),
                    let update = ApprovalSQL.transition(cancelled.transition, of: cancelled.request, writtenAt: now), try db.perform(update) == 1
                else { continue }
                // The event is made (and encoded) only for an integration that has somewhere to send it.
                if let integrationID = old.integrationID, try db.exists(IntegrationSQL.hasWebhook(integrationID: integrationID)),
                    let event = supersededEvent(cancelled)
                {
                    try db.perform(ApprovalSQL.queueWebhook(event, integrationID: integrationID))
                }
                superseded.append(cancelled)
            }
            try db.perform(insert)
            return superseded
        }
    }

    public func request(id: String) async throws -> ApprovalRequest? {
        try await pool.read { db in try db.fetchFirst(ApprovalSQL.request(id: id)).map { try ApprovalRequest(row: $0) } }
    }

    /// Every live request, read row by row and handed on in batches: a start with a million of them
    /// never holds them all twice (that high-water mark would stay in the process). The rows are
    /// read in ranges of rowid, one reader per core at once: decoding them is most of a start's
    /// time, and nothing else runs then. Each reader reads its own snapshot; at start-up no write
    /// of this process comes between them, and another process's (the command line's) is seen as
    /// if it had come a moment before or after, row by row.
    public func liveRequests(_ body: @escaping @Sendable ([ApprovalRequest]) -> Void) async throws {
        let ranges = try await pool.read { db in
            Self.liveRanges(bounds: try Row.fetchOne(db.cachedStatement(sql: Self.liveRowids)), parts: Self.liveReaders)
        }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for range in ranges {
                group.addTask {
                    try await self.pool.read { db in
                        let statement = try db.cachedStatement(sql: Self.liveInRange)
                        var batch: [ApprovalRequest] = []
                        try db.forEach(statement, arguments: [range.lowerBound, range.upperBound]) { row in
                            batch.append(try ApprovalRequest(row: row, withPasswordHash: false))
                            if batch.count == Self.liveBatch {
                                body(batch)
                                batch.removeAll(keepingCapacity: true)
                            }
                        }
                        if !batch.isEmpty { body(batch) }
                    }
                }
            }
            try await group.waitForAll()
        }
    }

    /// Live requests per batch read at start-up.
    static let liveBatch = 1024
    /// Readers at once for the live requests at start-up.
    static let liveReaders = min(4, max(1, ProcessInfo.processInfo.activeProcessorCount))
    /// A range of rowids shorter than this is read by one reader.
    static let liveRangeSplit: Int64 = 50_000

    /// The lowest and highest rowid of each live state, each found at once in the partial index
    /// `approvals_live`. SQLite uses that index only where the query states its condition: with
    /// `state = 'pending'` alone, it walked the table (every finished row) for each bound.
    static let liveRowids = """
        SELECT (SELECT min(rowid) FROM approval_requests WHERE state IN ('pending', 'approved') AND state = 'pending') AS pending_low,
               (SELECT max(rowid) FROM approval_requests WHERE state IN ('pending', 'approved') AND state = 'pending') AS pending_high,
               (SELECT min(rowid) FROM approval_requests WHERE state IN ('pending', 'approved') AND state = 'approved') AS approved_low,
               (SELECT max(rowid) FROM approval_requests WHERE state IN ('pending', 'approved') AND state = 'approved') AS approved_high
        """
    static let liveInRange = "SELECT * FROM approval_requests WHERE state IN ('pending', 'approved') AND rowid BETWEEN ? AND ?"

    /// The rowids from the lowest live one to the highest, in up to `parts` ranges of equal span
    /// that together cover them all; none when nothing is live.
    static func liveRanges(bounds: Row?, parts: Int) -> [ClosedRange<Int64>] {
        let lows = [bounds?["pending_low"], bounds?["approved_low"]].compactMap { $0 as Int64? }
        let highs = [bounds?["pending_high"], bounds?["approved_high"]].compactMap { $0 as Int64? }
        guard let low = lows.min(), let high = highs.max() else { return [] }
        let span = high - low + 1
        let count = span < liveRangeSplit ? 1 : Int64(parts)
        let step = (span + count - 1) / count
        return stride(from: low, through: high, by: Int(step)).map { start in start...min(high, start + step - 1) }
    }

    public func pendingRequests(userID: String, now: Date) async throws -> [ApprovalRequest] {
        try await pool.read { db in try db.fetch(ApprovalSQL.pending(userID: userID, now: now)).map { try ApprovalRequest(row: $0) } }
    }

    public func dueRequests(now: Date, limit: Int) async throws -> [ApprovalRequest] {
        try await pool.read { db in try db.fetch(ApprovalSQL.due(now: now, limit: limit)).map { try ApprovalRequest(row: $0) } }
    }

    public func liveCounts() async throws -> [ApprovalState: Int] {
        try await pool.read { db in try counts(db.fetch(ApprovalSQL.liveCounts), by: "state") }
    }

    /// One process owns the file: the broker keeps its index.
    public var isShared: Bool { false }

    public func apply(
        _ transition: Transition, to request: ApprovalRequest, event: OutboxItem?, audit: AuditEvent?,
        writeTime: @escaping @Sendable () -> Date
    ) async throws -> Bool {
        let setsPassword = transition.setsPassword(of: request)
        return try await group.write { db in
            guard transition.from.isLive else { return false }  // terminal states never change
            // Completing a reset needs the held hash, which the update below clears: read it first.
            let held = setsPassword ? try db.fetchFirst(ApprovalSQL.heldPassword(requestID: request.id)) : nil
            // The write time is read now, in the transaction: the moment of the write, not of the decision.
            guard let update = ApprovalSQL.transition(transition, of: request, writtenAt: writeTime()), try db.perform(update) == 1 else {
                return false
            }
            if let event, let integrationID = request.integrationID {
                try db.perform(ApprovalSQL.queueWebhook(event, integrationID: integrationID))
            }
            if let audit { try Self.insert(audit, db) }
            if setsPassword {
                // The held hash becomes the password in the same transaction as the completion.
                guard let userID = try held?.get("user_id", as: String?.self), let hash = try held?.get("new_password_hash", as: String?.self) else {
                    throw DatabaseError(message: "approved request \(request.logReference) holds no password hash")
                }
                try db.perform(ApprovalSQL.replaceEmailResets(userID: userID, at: transition.at))
                for statement in AccountSQL.endOwnership(userID: userID, at: transition.at, by: "password set by a phone reset") {
                    try db.perform(statement)
                }
                try db.perform(AccountSQL.setPassword(userID: userID, passwordHash: hash))
            }
            return true
        }
    }
}

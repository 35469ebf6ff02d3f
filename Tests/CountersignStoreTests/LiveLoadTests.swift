import CountersignCore
import Foundation
import GRDB
import Logging
import Synchronization
import TestSupport
import Testing

@testable import CountersignStore

/// A start loads every live request once, without its reset's password hash,
/// though the rows are read by several readers in ranges of rowid.
@Suite final class LiveLoadTests: Sendable {
    let folder: URL

    init() throws { folder = try makeTemporaryFolder("countersign-liveload") }
    deinit { try? FileManager.default.removeItem(at: folder) }

    static func request(_ id: String) -> ApprovalRequest {
        ApprovalRequest(
            id: id, userID: nil, subject: "unknown:\(id)", action: .passwordReset, state: .pending, createdAt: Date(),
            expiresAt: Date().addingTimeInterval(60), completionWindow: 120, updatedAt: Date(), numberCode: nil,
            newPasswordHash: "$2b$04$held-hash", requester: RequesterInfo(ip: "127.0.0.1", userAgent: nil))
    }

    @Test func everyLiveRequestIsLoadedOnceAcrossTheReadersRanges() async throws {
        let store = try SQLiteStore(path: folder.appendingPathComponent("live.sqlite").path, logger: Logger(label: "test"))
        defer { try? store.close() }
        let ids = (0..<40).map { "r\($0)" }
        for id in ids { _ = try await store.insert(Self.request(id), idempotency: nil, supersededEvent: { _ in nil }) }
        try await store.pool.write { db in
            // Spread far apart (several readers' ranges), one approved at the top, finished ones between.
            for (position, id) in ids.enumerated() {
                try db.execute(sql: "UPDATE approval_requests SET rowid = ? WHERE id = ?", arguments: [1000 + position * 9_973, id])
            }
            try db.execute(sql: "UPDATE approval_requests SET state = 'approved', complete_by = expires_at WHERE id = 'r39'")
            try db.execute(sql: "UPDATE approval_requests SET state = 'expired' WHERE id IN ('r0', 'r17', 'r38')")
        }
        let batches = Mutex<[[String]]>([])
        try await store.liveRequests { batch in batches.withLock { $0.append(batch.map(\.id)) } }
        let loaded = batches.withLock { $0.flatMap { $0 } }
        #expect(loaded.count == 37)
        #expect(Set(loaded) == Set(ids).subtracting(["r0", "r17", "r38"]))
        let requests = try await store.liveRequests()
        #expect(requests.first { $0.id == "r39" }?.state == .approved)
        // Read in place, column after column: each as a lookup by id reads it, but for the hash.
        for request in requests {
            var stored = try #require(try await store.request(id: request.id))
            #expect(stored.newPasswordHash == "$2b$04$held-hash")
            stored.newPasswordHash = nil
            #expect(request == stored)
        }
        // The row keeps it: the completion reads it there.
        #expect(try await store.request(id: "r39")?.newPasswordHash == "$2b$04$held-hash")
    }

    /// The bounds and the ranges are read in the partial index of live requests: a plan that
    /// walked the table would read every finished request at each start.
    @Test func theStartsQueriesReadTheLiveIndexNotTheTable() async throws {
        let store = try SQLiteStore(path: folder.appendingPathComponent("plan.sqlite").path, logger: Logger(label: "test"))
        defer { try? store.close() }
        let plans = try await store.pool.read { db in
            try [SQLiteStore.liveRowids, SQLiteStore.liveInRange].map { sql in
                try Row.fetchAll(db, sql: "EXPLAIN QUERY PLAN " + sql, arguments: sql.contains("?") ? [1, 2] : [])
                    .map { $0["detail"] as String }
                    .filter { $0.contains("approval_requests") }
            }
        }
        #expect(plans[0].count == 4)
        #expect(plans[1].count == 1)
        for detail in plans.joined() { #expect(detail.contains("INDEX approvals_live"), "\(detail)") }
    }

    @Test func theRangesCoverEachLiveRowidOnce() {
        let bounds: Row = ["pending_low": 7, "pending_high": 150_000, "approved_low": 3, "approved_high": 90]
        for parts in 1...4 {
            let ranges = SQLiteStore.liveRanges(bounds: bounds, parts: parts)
            #expect(ranges.count == parts)
            #expect(ranges.first?.lowerBound == 3 && ranges.last?.upperBound == 150_000)
            for (range, next) in zip(ranges, ranges.dropFirst()) { #expect(range.upperBound + 1 == next.lowerBound) }
        }
        #expect(
            SQLiteStore.liveRanges(bounds: ["pending_low": 5, "pending_high": 9, "approved_low": nil, "approved_high": nil], parts: 4) == [5...9])
        #expect(
            SQLiteStore.liveRanges(bounds: ["pending_low": nil, "pending_high": nil, "approved_low": nil, "approved_high": nil], parts: 2).isEmpty)
        #expect(SQLiteStore.liveRanges(bounds: nil, parts: 2).isEmpty)
    }
}

import CountersignCore
import CountersignSQL
import Foundation
import GRDB

extension SQLiteStore: ApprovalStore {
    public func insert(
        _ request: ApprovalRequest, idempotency: IdempotencyRecord?, supersededEvent: @escaping @Sendable (Supersession) -> OutboxItem?
    ) async throws -> [Supersession] {
        let prompt = try request.prompt?.storedJSON()
        let now = request.createdAt
        return try await group.write { db in
            if let idempotency {
                try db.perform(ApprovalSQL.forgetStaleKey(idempotency))
                if try db.perform(ApprovalSQL.insertKey(idempotency, at: now)) == 0 { throw IdempotencyKeyTaken() }
            }
            var superseded: [Supersession] = []
            for old in try db.fetch(ApprovalSQL.supersedable(by: request, .sqlite)).map(ApprovalRequest.init(row:)) {
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
            try db.perform(ApprovalSQL.insert(request, prompt: prompt))
            return superseded
        }
    }

    public func request(id: String) async throws -> ApprovalRequest? {
        try await pool.read { db in try db.fetchFirst(ApprovalSQL.request(id: id)).map(ApprovalRequest.init(row:)) }
    }

    /// Every live request, read row by row: a start with 100,000 of them never holds 100,000 rows
    /// at once beside the requests made of them (that high-water mark would stay in the process).
    public func liveRequests() async throws -> [ApprovalRequest] {
        try await pool.read { db in
            var requests: [ApprovalRequest] = []
            try db.forEach(ApprovalSQL.live) { requests.append(try ApprovalRequest(row: $0)) }
            return requests
        }
    }

    public func pendingRequests(userID: String, now: Date) async throws -> [ApprovalRequest] {
        try await pool.read { db in try db.fetch(ApprovalSQL.pending(userID: userID, now: now)).map(ApprovalRequest.init(row:)) }
    }

    public func dueRequests(now: Date, limit: Int) async throws -> [ApprovalRequest] {
        try await pool.read { db in try db.fetch(ApprovalSQL.due(now: now, limit: limit)).map(ApprovalRequest.init(row:)) }
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

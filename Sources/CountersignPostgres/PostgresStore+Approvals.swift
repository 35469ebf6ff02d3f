import CountersignCore
import CountersignSQL
import Foundation
import PostgresNIO

extension PostgresStore: ApprovalStore {
    /// Other nodes change requests too: the broker reads through.
    public var isShared: Bool { true }

    public func insert(
        _ request: ApprovalRequest, idempotency: IdempotencyRecord?, supersededEvent: @escaping @Sendable (Supersession) -> OutboxItem?
    ) async throws -> [Supersession] {
        let prompt = try request.prompt?.storedJSON()
        let now = request.createdAt
        return try await transaction { connection in
            if let idempotency {
                try await connection.perform(ApprovalSQL.forgetStaleKey(idempotency), self.logger)
                // A racing insert of the same key waits here for the other's commit, then finds it taken.
                if try await connection.perform(ApprovalSQL.insertKey(idempotency, at: now), self.logger) == 0 { throw IdempotencyKeyTaken() }
            }
            // Creates for one subject and action take turns: a racing one waits here, then sees this one's row pending.
            try await Self.serialize("approval", request.subject + "\u{1F}" + request.action.rawValue, connection, self.logger)
            // Locked: a racing insert for the same subject waits, then no longer sees them pending.
            var superseded: [Supersession] = []
            for old in try await connection.fetch(ApprovalSQL.supersedable(by: request, .postgres).appending(" FOR UPDATE"), self.logger)
                .map { try ApprovalRequest(row: $0) }
            {
                guard let cancelled = Supersession.of(old, at: now),
                    let update = ApprovalSQL.transition(cancelled.transition, of: cancelled.request, writtenAt: now),
                    try await connection.perform(update, self.logger) == 1
                else { continue }
                // Made even without a webhook: asking first would be one more round trip while
                // the rows are locked (the insert queues it only where the integration has one).
                if let event = supersededEvent(cancelled), let integrationID = old.integrationID {
                    try await connection.perform(ApprovalSQL.queueWebhook(event, integrationID: integrationID), self.logger)
                }
                try await Self.notify(old.id, connection, self.logger)
                superseded.append(cancelled)
            }
            try await connection.perform(ApprovalSQL.insert(request, prompt: prompt), self.logger)
            return superseded
        }
    }

    public func request(id: String) async throws -> ApprovalRequest? {
        try await fetch(ApprovalSQL.request(id: id)).first.map { try ApprovalRequest(row: $0) }
    }

    public func liveRequests(_ body: @escaping @Sendable ([ApprovalRequest]) -> Void) async throws {
        body(try await fetch(ApprovalSQL.live).map { try ApprovalRequest(row: $0, withPasswordHash: false) })
    }

    public func pendingRequests(userID: String, now: Date) async throws -> [ApprovalRequest] {
        try await fetch(ApprovalSQL.pending(userID: userID, now: now)).map { try ApprovalRequest(row: $0) }
    }

    public func dueRequests(now: Date, limit: Int) async throws -> [ApprovalRequest] {
        try await fetch(ApprovalSQL.due(now: now, limit: limit)).map { try ApprovalRequest(row: $0) }
    }

    public func liveCounts() async throws -> [ApprovalState: Int] {
        try counts(try await fetch(ApprovalSQL.liveCounts), by: "state")
    }

    public func apply(
        _ transition: Transition, to request: ApprovalRequest, event: OutboxItem?, audit: AuditEvent?,
        writeTime: @escaping @Sendable () -> Date
    ) async throws -> Bool {
        let setsPassword = transition.setsPassword(of: request)
        return try await transaction { connection in
            guard transition.from.isLive else { return false }  // terminal states never change
            // Completing a reset needs the held hash, which the update below clears: read (and lock) it first.
            let held =
                setsPassword
                ? try await connection.fetch(ApprovalSQL.heldPassword(requestID: request.id).appending(" FOR UPDATE"), self.logger).first : nil
            // The write time is read now, after the held hash's lock (a reset's completion waits there): the moment of the write.
            guard let update = ApprovalSQL.transition(transition, of: request, writtenAt: writeTime()),
                try await connection.perform(update, self.logger) == 1
            else { return false }
            if let event, let integrationID = request.integrationID {
                try await connection.perform(ApprovalSQL.queueWebhook(event, integrationID: integrationID), self.logger)
            }
            if let audit { try await Self.insert(audit, connection, self.logger) }
            if setsPassword {
                // The held hash becomes the password in the same transaction as the completion.
                guard let userID = try held?.get("user_id", as: String?.self), let hash = try held?.get("new_password_hash", as: String?.self) else {
                    throw PostgresStoreError.corrupt("approved request \(request.logReference) holds no password hash")
                }
                try await connection.perform(ApprovalSQL.replaceEmailResets(userID: userID, at: transition.at), self.logger)
                for statement in AccountSQL.endOwnership(userID: userID, at: transition.at, by: "password set by a phone reset") {
                    try await connection.perform(statement, self.logger)
                }
                try await connection.perform(AccountSQL.setPassword(userID: userID, passwordHash: hash), self.logger)
            }
            // Delivered to every node's listener when this transaction commits.
            try await Self.notify(request.id, connection, self.logger)
            return true
        }
    }

    static func notify(_ id: String, _ connection: PostgresConnection, _ logger: Logger) async throws {
        try await connection.run("SELECT pg_notify(\(channel), \(id))", logger)
    }
}

import CountersignCore
import CountersignSQL
import Foundation
import PostgresNIO

extension PostgresStore: EmailResetStore {
    public func issueEmailReset(_ ticket: EmailResetTicket, mail: OutboxItem?) async throws -> (replaced: Int, droppedMails: [String]) {
        try await transaction { connection in
            // Codes for one address take turns: a racing one waits here, then sees this one's ticket active.
            try await Self.serialize("email_reset", ticket.email, connection, self.logger)
            // Earlier unsent mails of the replaced tickets are useless now: they go with them.
            let dropped = try await connection.fetch(EmailResetSQL.dropMails(email: ticket.email, at: ticket.createdAt), self.logger)
                .map { try $0.get("id", as: String.self) }
            let replaced = try await connection.perform(EmailResetSQL.replaceActive(email: ticket.email, at: ticket.createdAt), self.logger)
            try await connection.perform(EmailResetSQL.insert(ticket), self.logger)
            if let mail { try await Self.insert(mail, connection, self.logger) }
            return (replaced, dropped)
        }
    }

    public func activeEmailReset(email: String) async throws -> EmailResetTicket? {
        try await fetch(EmailResetSQL.active(email: email)).first.map(EmailResetTicket.init(row:))
    }

    public func emailReset(tokenHash: String) async throws -> EmailResetTicket? {
        try await fetch(EmailResetSQL.reset(tokenHash: tokenHash)).first.map(EmailResetTicket.init(row:))
    }

    public func takeEmailResetTry(id: String, maxTries: Int, now: Date) async throws -> Int? {
        try await fetch(EmailResetSQL.takeTry(id: id, maxTries: maxTries, now: now)).first?.get("tries")
    }

    public func returnEmailResetTry(id: String) async throws {
        try await fetch(EmailResetSQL.returnTry(id: id))
    }

    public func redeemEmailReset(id: String, passwordHash: String, now: Date) async throws -> [CancelledReset]? {
        try await transaction { connection in
            // Locks in the order a phone reset's completion takes them (its request, then
            // email resets, then the user), so that the two cannot deadlock.
            if let owner = try await connection.fetch(EmailResetSQL.owner(id: id), self.logger).first,
                let userID = try owner.get("user_id", as: String?.self)
            {
                try await connection.run(
                    "SELECT id FROM approval_requests WHERE user_id = \(userID) AND state IN ('pending', 'approved') FOR UPDATE", self.logger)
            }
            guard let userID = try await connection.fetch(EmailResetSQL.redeem(id: id, now: now), self.logger).first?.get("user_id", as: String.self)
            else { return nil }
            for statement in AccountSQL.endOwnership(userID: userID, at: now, by: "password set by an email reset") {
                try await connection.perform(statement, self.logger)
            }
            guard try await connection.perform(AccountSQL.setPassword(userID: userID, passwordHash: passwordHash), self.logger) == 1 else {
                return nil
            }
            // One recovery at a time: a live phone reset must not overwrite this password later.
            return try await Self.cancelLivePhoneResets(userID: userID, now: now, by: "email reset", connection, self.logger)
        }
    }

    /// Cancels the user's live phone resets, audited and notified to every node, in the caller's transaction.
    static func cancelLivePhoneResets(
        userID: String, now: Date, by path: String, _ connection: PostgresConnection, _ logger: Logger
    ) async throws -> [CancelledReset] {
        var cancelled: [CancelledReset] = []
        for row in try await connection.fetch(EmailResetSQL.livePhoneResets(userID: userID).appending(" FOR UPDATE"), logger) {
            guard let (reset, update) = CancelledReset.cancellation(of: try ApprovalRequest(row: row), at: now),
                try await connection.perform(update, logger) == 1
            else { continue }
            try await Self.insert(CancelledReset.auditEvent(reset.id, userID: userID, at: now, by: path), connection, logger)
            // Every node's long polls of it wake when this commits.
            try await Self.notify(reset.id, connection, logger)
            cancelled.append(reset)
        }
        return cancelled
    }

    /// Email resets and outbox items that ended (or expired) before `date`.
    /// Each delete is a statement of its own: in one transaction the rows
    /// deleted first would stay locked, against the upserts of requests
    /// (rate counters, idempotency keys), until the last delete ended.
    public func pruneFinishedResets(before date: Date) async throws -> Int {
        var removed = 0
        for statement in EmailResetSQL.prune(before: date) { removed += try await rows(PostgresQuery(statement), bounded: false).count }
        // Rate counters whose window ended a day ago (the longest limit's window is an hour by default).
        let counters = try await rows(
            "DELETE FROM rate_counters WHERE opened < \(Date().addingTimeInterval(-86400).stored) RETURNING key", bounded: false
        ).count
        let records = try await withConnection(bounded: false) { [logger] connection in
            try await Self.pruneIntegrationRecords(now: Date(), connection, logger)
        }
        return removed + counters + records
    }
}

import CountersignCore
import CountersignSQL
import Foundation
import GRDB

extension SQLiteStore: EmailResetStore {
    public func issueEmailReset(_ ticket: EmailResetTicket, mail: OutboxItem?) async throws -> (replaced: Int, droppedMails: [String]) {
        try await pool.write { db in
            // Earlier unsent mails of the replaced tickets are useless now: they go with them.
            let dropped = try db.fetch(EmailResetSQL.dropMails(email: ticket.email, at: ticket.createdAt)).map { try $0.get("id", as: String.self) }
            let replaced = try db.perform(EmailResetSQL.replaceActive(email: ticket.email, at: ticket.createdAt))
            try db.perform(EmailResetSQL.insert(ticket))
            if let mail { try Self.insert(mail, db) }
            return (replaced, dropped)
        }
    }

    public func activeEmailReset(email: String) async throws -> EmailResetTicket? {
        try await pool.read { db in try db.fetchFirst(EmailResetSQL.active(email: email)).map(EmailResetTicket.init(row:)) }
    }

    public func emailReset(tokenHash: String) async throws -> EmailResetTicket? {
        try await pool.read { db in try db.fetchFirst(EmailResetSQL.reset(tokenHash: tokenHash)).map(EmailResetTicket.init(row:)) }
    }

    public func takeEmailResetTry(id: String, maxTries: Int, now: Date) async throws -> Int? {
        try await pool.write { db in try db.fetchFirst(EmailResetSQL.takeTry(id: id, maxTries: maxTries, now: now))?.get("tries") }
    }

    public func returnEmailResetTry(id: String) async throws {
        _ = try await pool.write { db in try db.perform(EmailResetSQL.returnTry(id: id)) }
    }

    public func redeemEmailReset(id: String, passwordHash: String, now: Date) async throws -> [CancelledReset]? {
        try await pool.write { db in
            guard let userID = try db.fetchFirst(EmailResetSQL.redeem(id: id, now: now))?.get("user_id", as: String.self) else { return nil }
            for statement in AccountSQL.endOwnership(userID: userID, at: now, by: "password set by an email reset") { try db.perform(statement) }
            guard try db.perform(AccountSQL.setPassword(userID: userID, passwordHash: passwordHash)) == 1 else { return nil }
            // One recovery at a time: a live phone reset must not overwrite this password later.
            return try Self.cancelLivePhoneResets(userID: userID, now: now, by: "email reset", db)
        }
    }

    /// Cancels the user's live phone resets, audited, in the caller's transaction: the password changed another way.
    static func cancelLivePhoneResets(userID: String, now: Date, by path: String, _ db: Database) throws -> [CancelledReset] {
        var cancelled: [CancelledReset] = []
        for row in try db.fetch(EmailResetSQL.livePhoneResets(userID: userID)) {
            guard let (reset, update) = CancelledReset.cancellation(of: try ApprovalRequest(row: row), at: now), try db.perform(update) == 1
            else { continue }
            try Self.insert(CancelledReset.auditEvent(reset.id, userID: userID, at: now, by: path), db)
            cancelled.append(reset)
        }
        return cancelled
    }

    /// Email resets and outbox items that ended (or expired) before `date`.
    public func pruneFinishedResets(before date: Date) async throws -> Int {
        try await pool.write { db in
            try EmailResetSQL.prune(before: date).reduce(0) { count, statement in count + (try db.perform(statement)) }
                + (try Self.pruneIntegrationRecords(now: Date(), db))
        }
    }
}

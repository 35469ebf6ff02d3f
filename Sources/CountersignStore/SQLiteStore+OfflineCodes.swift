import CountersignCore
import Foundation
import GRDB

extension SQLiteStore: OfflineCodeStore {
    public func useOfflineStep(deviceID: String, step: Int64, sealed: Data, resetRight: Bool) async throws -> Bool {
        try await group.write { db in
            try db.cachedStatement(
                sql: """
                    UPDATE devices SET offline_step = ?
                    WHERE id = ? AND offline_secret = ? AND (offline_step IS NULL OR offline_step < ?) AND (may_approve_resets OR NOT ?)
                    """
            ).execute(arguments: [step, deviceID, sealed, step, resetRight])
            return db.changesCount == 1
        }
    }

    public func takeCodeTry(requestID: String, limit: Int) async throws -> Int? {
        try await group.write { db in
            try Int.fetchOne(
                db.cachedStatement(
                    sql: """
                        UPDATE approval_requests SET wrong_codes = wrong_codes + 1
                        WHERE id = ? AND state = 'pending' AND wrong_codes < ? RETURNING wrong_codes
                        """),
                arguments: [requestID, limit])
        }
    }

    public func restoreBypassCode(userID: String, codeHash: String, usedAt: Date) async throws {
        try await group.write { db in
            try db.cachedStatement(sql: "UPDATE bypass_codes SET used_at = NULL WHERE user_id = ? AND code_hash = ? AND used_at = ?")
                .execute(arguments: [userID, codeHash, usedAt.storedValue])
        }
    }

    public func useBypassCode(userID: String, codeHash: String, passwordReset: Bool, now: Date) async throws -> Bool {
        try await group.write { db in
            try db.cachedStatement(
                sql: """
                    UPDATE bypass_codes SET used_at = ?
                    WHERE user_id = ? AND code_hash = ? AND used_at IS NULL AND expires_at > ? AND (for_password_reset OR NOT ?)
                    """
            ).execute(arguments: [now.storedValue, userID, codeHash, now.storedValue, passwordReset])
            return db.changesCount == 1
        }
    }

    public func replaceBypassCodes(userID: String, codeHashes: [String], forPasswordReset: Bool, expiresAt: Date, now: Date) async throws {
        try await pool.write { db in
            try db.execute(sql: "DELETE FROM bypass_codes WHERE user_id = ?", arguments: [userID])
            for hash in codeHashes {
                try db.cachedStatement(
                    sql: "INSERT INTO bypass_codes (user_id, code_hash, for_password_reset, created_at, expires_at) VALUES (?, ?, ?, ?, ?)"
                ).execute(arguments: [userID, hash, forPasswordReset, now.storedValue, expiresAt.storedValue])
            }
        }
    }

    public func revokeBypassCodes(userID: String, now: Date) async throws -> Int {
        try await pool.write { db in
            try db.execute(
                sql: "DELETE FROM bypass_codes WHERE user_id = ? AND used_at IS NULL AND expires_at > ?", arguments: [userID, now.storedValue])
            let voided = db.changesCount
            // The used and expired ones have nothing left to void.
            try db.execute(sql: "DELETE FROM bypass_codes WHERE user_id = ?", arguments: [userID])
            return voided
        }
    }
}

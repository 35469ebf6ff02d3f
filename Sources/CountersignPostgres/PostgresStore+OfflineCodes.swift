import CountersignCore
import Foundation
import PostgresNIO

extension PostgresStore: OfflineCodeStore {
    public func useOfflineStep(deviceID: String, step: Int64, sealed: Data, resetRight: Bool) async throws -> Bool {
        try await rows(
            """
            UPDATE devices SET offline_step = \(step)
            WHERE id = \(deviceID) AND offline_secret = \(sealed) AND (offline_step IS NULL OR offline_step < \(step))
                AND (may_approve_resets OR NOT \(resetRight))
            RETURNING id
            """
        ).count == 1
    }

    public func takeCodeTry(requestID: String, limit: Int) async throws -> Int? {
        try await value(
            Int32.self,
            """
            UPDATE approval_requests SET wrong_codes = wrong_codes + 1
            WHERE id = \(requestID) AND state = 'pending' AND wrong_codes < \(limit) RETURNING wrong_codes
            """
        ).map(Int.init)
    }

    public func restoreBypassCode(userID: String, codeHash: String, usedAt: Date) async throws {
        try await rows(
            """
            UPDATE bypass_codes SET used_at = NULL WHERE user_id = \(userID) AND code_hash = \(codeHash) AND used_at = \(usedAt.stored)
            RETURNING user_id
            """)
    }

    public func useBypassCode(userID: String, codeHash: String, passwordReset: Bool, now: Date) async throws -> Bool {
        try await rows(
            """
            UPDATE bypass_codes SET used_at = \(now.stored)
            WHERE user_id = \(userID) AND code_hash = \(codeHash) AND used_at IS NULL AND expires_at > \(now.stored)
                AND (for_password_reset OR NOT \(passwordReset))
            RETURNING user_id
            """
        ).count == 1
    }

    public func replaceBypassCodes(userID: String, codeHashes: [String], forPasswordReset: Bool, expiresAt: Date, now: Date) async throws {
        try await transaction { connection in
            try await connection.run("DELETE FROM bypass_codes WHERE user_id = \(userID)", self.logger)
            for hash in codeHashes {
                try await connection.run(
                    """
                    INSERT INTO bypass_codes (user_id, code_hash, for_password_reset, created_at, expires_at)
                    VALUES (\(userID), \(hash), \(forPasswordReset), \(now.stored), \(expiresAt.stored))
                    """, self.logger)
            }
        }
    }

    public func revokeBypassCodes(userID: String, now: Date) async throws -> Int {
        try await transaction { connection in
            let voided = try await connection.run(
                "DELETE FROM bypass_codes WHERE user_id = \(userID) AND used_at IS NULL AND expires_at > \(now.stored) RETURNING user_id", self.logger
            )
            // The used and expired ones have nothing left to void.
            try await connection.run("DELETE FROM bypass_codes WHERE user_id = \(userID)", self.logger)
            return voided
        }
    }
}

import CountersignCore
import CountersignSQL
import Foundation
import GRDB

extension SQLiteStore: OfflineCodeStore {
    public func useOfflineStep(deviceID: String, step: Int64, sealed: Data, resetRight: Bool) async throws -> Bool {
        try await group.write { db in
            try db.perform(OfflineCodeSQL.useStep(deviceID: deviceID, step: step, sealed: sealed, resetRight: resetRight)) == 1
        }
    }

    public func takeCodeTry(requestID: String, limit: Int) async throws -> Int? {
        try await group.write { db in try db.fetchFirst(OfflineCodeSQL.takeCodeTry(requestID: requestID, limit: limit))?.get("wrong_codes") }
    }

    public func takeUserCodeTry(userID: String, limit: Int, window: TimeInterval, now: Date) async throws -> UserCodeTry {
        try await group.write { db in
            if let row = try db.fetchFirst(
                OfflineCodeSQL.takeUserCodeTry(userID: userID, limit: limit, windowStart: now.addingTimeInterval(-window), now: now))
            {
                return .taken(try row.get("wrong_codes"), windowStart: try row.get("wrong_codes_since"))
            }
            guard let row = try db.fetchFirst(OfflineCodeSQL.userCodeWindow(userID: userID)) else { return .noUser }
            let since: Date = try row.get("wrong_codes_since", as: Date?.self) ?? now
            return .locked(until: since.addingTimeInterval(window))
        }
    }

    public func giveBackUserCodeTry(userID: String, windowStart: Date) async throws {
        _ = try await group.write { db in try db.perform(OfflineCodeSQL.giveBackUserCodeTry(userID: userID, windowStart: windowStart)) }
    }

    public func unlockCodes(userID: String) async throws -> Bool {
        try await pool.write { db in try db.perform(OfflineCodeSQL.unlockCodes(userID: userID)) == 1 }
    }

    public func restoreBypassCode(userID: String, codeHash: String, usedAt: Date) async throws {
        _ = try await group.write { db in try db.perform(OfflineCodeSQL.restoreBypassCode(userID: userID, codeHash: codeHash, usedAt: usedAt)) }
    }

    public func useBypassCode(userID: String, codeHash: String, passwordReset: Bool, now: Date) async throws -> Bool {
        try await group.write { db in
            try db.perform(OfflineCodeSQL.useBypassCode(userID: userID, codeHash: codeHash, passwordReset: passwordReset, now: now)) == 1
        }
    }

    public func replaceBypassCodes(userID: String, codeHashes: [String], forPasswordReset: Bool, expiresAt: Date, now: Date) async throws {
        try await pool.write { db in
            try db.perform(OfflineCodeSQL.deleteBypassCodes(userID: userID))
            for hash in codeHashes {
                try db.perform(
                    OfflineCodeSQL.insertBypassCode(
                        userID: userID, codeHash: hash, forPasswordReset: forPasswordReset, expiresAt: expiresAt, now: now))
            }
        }
    }

    public func revokeBypassCodes(userID: String, now: Date) async throws -> Int {
        try await pool.write { db in
            let voided = try db.perform(OfflineCodeSQL.deleteUsableBypassCodes(userID: userID, now: now))
            // The used and expired ones have nothing left to void.
            try db.perform(OfflineCodeSQL.deleteBypassCodes(userID: userID))
            return voided
        }
    }
}

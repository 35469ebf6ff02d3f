import CountersignCore
import CountersignSQL
import Foundation
import PostgresNIO

extension PostgresStore: OfflineCodeStore {
    public func useOfflineStep(deviceID: String, step: Int64, sealed: Data, resetRight: Bool) async throws -> Bool {
        try await fetch(OfflineCodeSQL.useStep(deviceID: deviceID, step: step, sealed: sealed, resetRight: resetRight)).count == 1
    }

    public func takeCodeTry(requestID: String, limit: Int) async throws -> Int? {
        try await fetch(OfflineCodeSQL.takeCodeTry(requestID: requestID, limit: limit)).first?.get("wrong_codes")
    }

    public func takeUserCodeTry(userID: String, limit: Int, window: TimeInterval, now: Date) async throws -> UserCodeTry {
        if let row = try await fetch(
            OfflineCodeSQL.takeUserCodeTry(userID: userID, limit: limit, windowStart: now.addingTimeInterval(-window), now: now)
        ).first {
            // Read as the shared rows read times (Unix seconds), not as PostgresNIO's own dates.
            return .taken(try row.get("wrong_codes"), windowStart: Date(timeIntervalSince1970: try row.real("wrong_codes_since") ?? 0))
        }
        guard let row = try await fetch(OfflineCodeSQL.userCodeWindow(userID: userID)).first else { return .noUser }
        let since = try row.real("wrong_codes_since").map(Date.init(timeIntervalSince1970:)) ?? now
        return .locked(until: since.addingTimeInterval(window))
    }

    public func giveBackUserCodeTry(userID: String, windowStart: Date) async throws {
        try await fetch(OfflineCodeSQL.giveBackUserCodeTry(userID: userID, windowStart: windowStart))
    }

    public func unlockCodes(userID: String) async throws -> Bool {
        try await fetch(OfflineCodeSQL.unlockCodes(userID: userID)).count == 1
    }

    public func restoreBypassCode(userID: String, codeHash: String, usedAt: Date) async throws {
        try await fetch(OfflineCodeSQL.restoreBypassCode(userID: userID, codeHash: codeHash, usedAt: usedAt))
    }

    public func useBypassCode(userID: String, codeHash: String, passwordReset: Bool, now: Date) async throws -> Bool {
        try await fetch(OfflineCodeSQL.useBypassCode(userID: userID, codeHash: codeHash, passwordReset: passwordReset, now: now)).count == 1
    }

    public func replaceBypassCodes(userID: String, codeHashes: [String], forPasswordReset: Bool, expiresAt: Date, now: Date) async throws {
        try await transaction { connection in
            try await connection.perform(OfflineCodeSQL.deleteBypassCodes(userID: userID), self.logger)
            for hash in codeHashes {
                try await connection.perform(
                    OfflineCodeSQL.insertBypassCode(
                        userID: userID, codeHash: hash, forPasswordReset: forPasswordReset, expiresAt: expiresAt, now: now),
                    self.logger)
            }
        }
    }

    public func revokeBypassCodes(userID: String, now: Date) async throws -> Int {
        try await transaction { connection in
            let voided = try await connection.perform(OfflineCodeSQL.deleteUsableBypassCodes(userID: userID, now: now), self.logger)
            // The used and expired ones have nothing left to void.
            try await connection.perform(OfflineCodeSQL.deleteBypassCodes(userID: userID), self.logger)
            return voided
        }
    }
}

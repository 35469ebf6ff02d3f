import Foundation

/// Offline codes (a device's TOTP steps, wrong tries of a request's code) and bypass codes: the statements both stores run.
public enum OfflineCodeSQL {
    /// Uses a step of the device's offline secret: only a later step than any used, only while the
    /// device still holds that secret, and (for a reset) only a device that may approve resets.
    public static func useStep(deviceID: String, step: Int64, sealed: Data, resetRight: Bool) -> SQLStatement {
        """
        UPDATE devices SET offline_step = \(step)
        WHERE id = \(deviceID) AND offline_secret = \(sealed) AND (offline_step IS NULL OR offline_step < \(step))
            AND (may_approve_resets OR NOT \(resetRight))
        RETURNING id
        """
    }

    /// Counts a wrong code against a pending request, under its limit (column `wrong_codes`).
    public static func takeCodeTry(requestID: String, limit: Int) -> SQLStatement {
        """
        UPDATE approval_requests SET wrong_codes = wrong_codes + 1
        WHERE id = \(requestID) AND state = 'pending' AND wrong_codes < \(limit) RETURNING wrong_codes
        """
    }

    /// Counts a wrong-code try against the user's bound across routes (columns `wrong_codes`,
    /// `wrong_codes_since`): a window that began at or before `windowStart` is over, and a new one
    /// begins at `now`. No row when the user has used up the bound in the current window.
    public static func takeUserCodeTry(userID: String, limit: Int, windowStart: Date, now: Date) -> SQLStatement {
        """
        UPDATE users SET
            wrong_codes = CASE WHEN wrong_codes_since IS NULL OR wrong_codes_since <= \(windowStart) THEN 1 ELSE wrong_codes + 1 END,
            wrong_codes_since = CASE WHEN wrong_codes_since IS NULL OR wrong_codes_since <= \(windowStart) THEN \(now) ELSE wrong_codes_since END
        WHERE id = \(userID) AND (wrong_codes_since IS NULL OR wrong_codes_since <= \(windowStart) OR wrong_codes < \(limit))
        RETURNING wrong_codes, wrong_codes_since
        """
    }

    /// A try ``takeUserCodeTry(userID:limit:windowStart:now:)`` took for a code that was right (or never checked),
    /// given back only to the window it was taken in.
    public static func giveBackUserCodeTry(userID: String, windowStart: Date) -> SQLStatement {
        """
        UPDATE users SET wrong_codes = wrong_codes - 1
        WHERE id = \(userID) AND wrong_codes > 0 AND wrong_codes_since = \(windowStart) RETURNING id
        """
    }

    /// When the user's current window of wrong codes began (column `wrong_codes_since`).
    public static func userCodeWindow(userID: String) -> SQLStatement { "SELECT wrong_codes_since FROM users WHERE id = \(userID)" }

    /// The operator's `user unlock`: the user's wrong codes are forgotten.
    public static func unlockCodes(userID: String) -> SQLStatement {
        "UPDATE users SET wrong_codes = 0, wrong_codes_since = NULL WHERE id = \(userID) RETURNING id"
    }

    public static func restoreBypassCode(userID: String, codeHash: String, usedAt: Date) -> SQLStatement {
        """
        UPDATE bypass_codes SET used_at = NULL WHERE user_id = \(userID) AND code_hash = \(codeHash) AND used_at = \(usedAt)
        RETURNING user_id
        """
    }

    public static func useBypassCode(userID: String, codeHash: String, passwordReset: Bool, now: Date) -> SQLStatement {
        """
        UPDATE bypass_codes SET used_at = \(now)
        WHERE user_id = \(userID) AND code_hash = \(codeHash) AND used_at IS NULL AND expires_at > \(now)
            AND (for_password_reset OR NOT \(passwordReset))
        RETURNING user_id
        """
    }

    public static func deleteBypassCodes(userID: String) -> SQLStatement { "DELETE FROM bypass_codes WHERE user_id = \(userID) RETURNING user_id" }

    /// The user's codes that could still be used.
    public static func deleteUsableBypassCodes(userID: String, now: Date) -> SQLStatement {
        "DELETE FROM bypass_codes WHERE user_id = \(userID) AND used_at IS NULL AND expires_at > \(now) RETURNING user_id"
    }

    public static func insertBypassCode(userID: String, codeHash: String, forPasswordReset: Bool, expiresAt: Date, now: Date) -> SQLStatement {
        """
        INSERT INTO bypass_codes (user_id, code_hash, for_password_reset, created_at, expires_at)
        VALUES (\(userID), \(codeHash), \(forPasswordReset), \(now), \(expiresAt))
        """
    }
}

import CountersignCore
import CountersignWire
import Foundation

/// Users and devices: the statements both stores run. A write that the caller counts
/// ends in `RETURNING`, so that PostgreSQL can say how many rows it changed;
/// SQLite counts its changes itself. Locks (`FOR UPDATE`) are PostgreSQL's to add.
public enum AccountSQL {
    /// Inserts the user unless the address is taken: returns a row only when it inserted.
    public static func insertUser(_ user: User) -> SQLStatement {
        """
        INSERT INTO users (id, email, password_hash, created_at) VALUES (\(user.id), \(user.email), \(user.passwordHash), \(user.createdAt))
        ON CONFLICT (email) DO NOTHING RETURNING id
        """
    }

    public static func user(email: String) -> SQLStatement { "SELECT * FROM users WHERE email = \(email)" }
    public static func user(id: String) -> SQLStatement { "SELECT * FROM users WHERE id = \(id)" }
    public static let users: SQLStatement = "SELECT * FROM users ORDER BY email"

    /// Replaces the hash only if it is still `old` (a login's rehash must not undo a password change).
    public static func rehashPassword(userID: String, from old: String, to new: String) -> SQLStatement {
        "UPDATE users SET password_hash = \(new) WHERE id = \(userID) AND password_hash = \(old) RETURNING id"
    }

    /// The distinct `$2b$12` prefixes of the stored bcrypt hashes (column `prefix`): the cost is after the second `$`.
    public static let passwordHashPrefixes: SQLStatement =
        "SELECT DISTINCT substr(password_hash, 1, 7) AS prefix FROM users WHERE password_hash LIKE '$2%'"

    /// Sets the password; a user given one is no integration's any more (trust.md): run
    /// ``endOwnership(userID:at:by:)`` first, in the same transaction.
    public static func setPassword(userID: String, passwordHash: String) -> SQLStatement {
        "UPDATE users SET password_hash = \(passwordHash), owner_integration_id = NULL WHERE id = \(userID) RETURNING id"
    }

    /// A user given a password is no integration's any more (trust.md): in the transaction that sets
    /// the password, before ``setPassword(userID:passwordHash:)`` clears the owner, the trail says which
    /// integration it was and that integration's unused enrollment codes for the user stop working.
    public static func endOwnership(userID: String, at now: Date, by cause: String) -> [SQLStatement] {
        [
            """
            INSERT INTO audit_events (at, kind, user_id, detail)
            SELECT \(now), 'ownership_ended', u.id, 'integration ' || i.name || '; ' || \(cause)
            FROM users u JOIN integrations i ON i.id = u.owner_integration_id WHERE u.id = \(userID)
            """,
            """
            DELETE FROM enrollments WHERE user_id = \(userID) AND used_at IS NULL
                AND integration_id = (SELECT owner_integration_id FROM users WHERE id = \(userID))
            RETURNING code_hash
            """,
        ]
    }

    public static func silence(userID: String, until: Date?) -> SQLStatement {
        "UPDATE users SET silenced_until = \(until) WHERE id = \(userID) RETURNING id"
    }

    public static func device(apiKeyHash: String) -> SQLStatement { "SELECT * FROM devices WHERE api_key_hash = \(apiKeyHash)" }
    public static func devices(userID: String) -> SQLStatement { "SELECT * FROM devices WHERE user_id = \(userID) ORDER BY created_at" }
    public static func device(userID: String, token: String) -> SQLStatement {
        "SELECT * FROM devices WHERE user_id = \(userID) AND fcm_token = \(token)"
    }
    public static func deviceOwner(deviceID: String) -> SQLStatement { "SELECT user_id FROM devices WHERE id = \(deviceID)" }
    public static func deviceCount(userID: String) -> SQLStatement { "SELECT count(*) AS n FROM devices WHERE user_id = \(userID)" }

    /// A row when a device of another user than `userID` holds the push token or endpoint.
    public static func tokenHeld(_ token: String, byOtherThan userID: String) -> SQLStatement {
        "SELECT 1 FROM devices WHERE fcm_token = \(token) AND user_id != \(userID) LIMIT 1"
    }

    public static func seen(deviceID: String, at now: Date) -> SQLStatement {
        "UPDATE devices SET last_seen_at = \(now) WHERE id = \(deviceID) RETURNING id"
    }

    public static func insertDevice(_ device: Device, apiKeyHash: String) -> SQLStatement {
        """
        INSERT INTO devices (
            id, user_id, name, platform, fcm_token, push_provider, push_options, push_enabled, api_key_hash, created_at, public_key,
            may_approve_resets, offline_secret, seal_key)
        VALUES (\(device.id), \(device.userID), \(device.name), \(device.platform), \(device.push?.token),
            \(PushAddress.storedProvider(of: device.push)), \(device.push?.storedOptions), \(device.pushEnabled), \(apiKeyHash),
            \(device.createdAt), \(device.publicKey?.json), \(device.mayApproveResets), \(device.offlineSecret),
            \(device.sealKey?.text))
        """
    }

    /// Sets the device's key only if it is still `current` (two rotations at once: one wins).
    public static func setKey(deviceID: String, key: DeviceKey, replacing current: DeviceKey?, _ dialect: SQLDialect) -> SQLStatement {
        """
        UPDATE devices SET public_key = \(key.json)
        WHERE id = \(deviceID) AND public_key \(unsafe: dialect.isNotDistinctFrom) \(current?.json) RETURNING id
        """
    }

    public static func replaceAPIKey(deviceID: String, apiKeyHash: String, offlineSecret: Data?) -> SQLStatement {
        """
        UPDATE devices SET api_key_hash = \(apiKeyHash), may_approve_resets = true, offline_secret = \(offlineSecret), offline_step = NULL
        WHERE id = \(deviceID) RETURNING id
        """
    }

    public static func forgetProofs(expiredBy now: Date) -> SQLStatement {
        "DELETE FROM used_proofs WHERE expires_at <= \(now) RETURNING device_id"
    }

    /// Records a proof as used: a row only when it was not used before.
    public static func useProof(_ use: ProofUse, until: Date) -> SQLStatement {
        """
        INSERT INTO used_proofs (device_id, thumbprint, issued_at, expires_at)
        VALUES (\(use.deviceID), \(use.thumbprint), \(Int64(use.issuedAt)), \(until))
        ON CONFLICT DO NOTHING RETURNING device_id
        """
    }

    /// The phone moved to `deviceID`: the user's other device with its token stops getting its prompts.
    public static func releaseToken(_ token: String, userID: String, keeping deviceID: String) -> SQLStatement {
        """
        UPDATE devices SET fcm_token = NULL, push_enabled = false
        WHERE fcm_token = \(token) AND user_id = \(userID) AND id != \(deviceID) RETURNING id
        """
    }

    public static func setPushAddress(deviceID: String, push: PushAddress?) -> SQLStatement {
        """
        UPDATE devices SET fcm_token = \(push?.token), push_provider = \(PushAddress.storedProvider(of: push)),
            push_options = \(push?.storedOptions), push_enabled = \(push != nil)
        WHERE id = \(deviceID) RETURNING id
        """
    }

    public static func setSealKey(deviceID: String, key: SealKey?) -> SQLStatement {
        "UPDATE devices SET seal_key = \(key?.text) WHERE id = \(deviceID) RETURNING id"
    }

    public static func disablePush(deviceID: String, token: String) -> SQLStatement {
        "UPDATE devices SET push_enabled = false WHERE id = \(deviceID) AND fcm_token = \(token) RETURNING id"
    }

    public static func deleteDevice(id: String) -> SQLStatement { "DELETE FROM devices WHERE id = \(id) RETURNING id" }
}

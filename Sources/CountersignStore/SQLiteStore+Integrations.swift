import CountersignCore
import CountersignSQL
import Foundation
import GRDB

extension SQLiteStore: IntegrationStore {
    public func createIntegration(_ integration: Integration, apiKeyHash: String) async throws {
        try await pool.write { db in
            if try Bool.fetchOne(db.cachedStatement(sql: "SELECT 1 FROM integrations WHERE name = ?"), arguments: [integration.name]) != nil {
                throw IntegrationError.nameTaken
            }
            try db.cachedStatement(
                sql: """
                    INSERT INTO integrations (id, name, api_key_hash, webhook_url, webhook_secret, enabled, created_at)
                    VALUES (?, ?, ?, ?, ?, ?, ?)
                    """
            ).execute(arguments: [
                integration.id, integration.name, apiKeyHash, integration.webhookURL, integration.webhookSecret, integration.enabled,
                integration.createdAt.storedValue,
            ])
        }
    }

    public func integrations() async throws -> [Integration] {
        try await pool.read { db in try Row.fetchAll(db.cachedStatement(sql: "SELECT * FROM integrations ORDER BY name")).map(Integration.init(row:))
        }
    }

    public func integration(id: String) async throws -> Integration? {
        try await pool.read { db in
            try Row.fetchOne(db.cachedStatement(sql: "SELECT * FROM integrations WHERE id = ?"), arguments: [id]).map(Integration.init(row:))
        }
    }

    public func integration(apiKeyHash: String) async throws -> Integration? {
        try readNow { db in
            try Row.fetchOne(db.cachedStatement(sql: "SELECT * FROM integrations WHERE api_key_hash = ?"), arguments: [apiKeyHash]).map(
                Integration.init(row:))
        }
    }

    public func rotateIntegrationKey(id: String, apiKeyHash: String) async throws -> Bool {
        try await pool.write { db in
            try db.cachedStatement(sql: "UPDATE integrations SET api_key_hash = ? WHERE id = ?").execute(arguments: [apiKeyHash, id])
            guard db.changesCount == 1 else { return false }
            try Self.voidEnrollments(integrationID: id, db)
            return true
        }
    }

    /// Unused codes of an integration stop working (disabled, or its key rotated).
    static func voidEnrollments(integrationID: String, _ db: Database) throws {
        try db.cachedStatement(sql: "DELETE FROM enrollments WHERE integration_id = ? AND used_at IS NULL").execute(arguments: [integrationID])
    }

    public func rotateWebhookSecret(integrationID: String, secret: String, previousUntil: Date) async throws -> Bool {
        try await pool.write { db in
            try db.cachedStatement(
                sql: """
                    UPDATE integrations SET webhook_secret_previous = webhook_secret, webhook_secret_previous_until = ?, webhook_secret = ?
                    WHERE id = ? AND webhook_url IS NOT NULL AND webhook_secret IS NOT NULL
                    """
            ).execute(arguments: [previousUntil.storedValue, secret, integrationID])
            return db.changesCount == 1
        }
    }

    public func setWebhook(integrationID: String, url: String?, secret: String?) async throws -> Bool {
        try await pool.write { db in
            // A secret replaced here (`--rotate-secret`, or the webhook removed) stops at once, the previous one too.
            try db.cachedStatement(
                sql: """
                    UPDATE integrations SET webhook_url = ?,
                        webhook_secret_previous = CASE WHEN webhook_secret IS ? THEN webhook_secret_previous END,
                        webhook_secret_previous_until = CASE WHEN webhook_secret IS ? THEN webhook_secret_previous_until END,
                        webhook_secret = ?
                    WHERE id = ?
                    """
            ).execute(arguments: [url, secret, secret, secret, integrationID])
            return db.changesCount == 1
        }
    }

    public func setIntegrationEnabled(id: String, enabled: Bool) async throws -> Bool {
        try await pool.write { db in
            try db.cachedStatement(sql: "UPDATE integrations SET enabled = ? WHERE id = ?").execute(arguments: [enabled, id])
            guard db.changesCount == 1 else { return false }
            if !enabled { try Self.voidEnrollments(integrationID: id, db) }
            return true
        }
    }

    public func ensureUser(email: String, integrationID: String) async throws -> (user: User, created: Bool) {
        let email = User.normalize(email: email)
        return try await pool.write { db in
            if let existing = try Row.fetchOne(db.cachedStatement(sql: "SELECT * FROM users WHERE email = ?"), arguments: [email]) {
                return (try User(row: existing), false)
            }
            // No password: the empty hash matches none (login checks a decoy instead).
            let user = User(id: SecureToken.recordID(), email: email, passwordHash: "", createdAt: Date())
            try db.cachedStatement(sql: "INSERT INTO users (id, email, password_hash, created_at, owner_integration_id) VALUES (?, ?, ?, ?, ?)")
                .execute(arguments: [user.id, user.email, user.passwordHash, user.createdAt.storedValue, integrationID])
            return (user, true)
        }
    }

    public func user(email: String, reachableBy integrationID: String) async throws -> User? {
        try readNow { db in
            try Row.fetchOne(
                db.cachedStatement(sql: "SELECT * FROM users u WHERE email = ? AND \(Self.reaches("?"))"),
                arguments: [User.normalize(email: email), integrationID, integrationID]
            ).map(User.init(row:))
        }
    }

    public func user(email: String, ownedBy integrationID: String) async throws -> User? {
        try readNow { db in
            try Row.fetchOne(
                db.cachedStatement(sql: "SELECT * FROM users WHERE email = ? AND owner_integration_id = ?"),
                arguments: [User.normalize(email: email), integrationID]
            ).map(User.init(row:))
        }
    }

    /// The condition that the integration `integration` (an SQL expression: `?`, bound
    /// twice, or a column) reaches the user `u`: it created the user, or was granted it.
    static func reaches(_ integration: String) -> String {
        """
        (u.owner_integration_id = \(integration)
            OR EXISTS (SELECT 1 FROM integration_grants g WHERE g.user_id = u.id AND g.integration_id = \(integration)))
        """
    }

    public func grantUser(integrationID: String, userID: String, at: Date) async throws -> Bool {
        try await pool.write { db in
            try db.cachedStatement(sql: "INSERT OR IGNORE INTO integration_grants (integration_id, user_id, created_at) VALUES (?, ?, ?)")
                .execute(arguments: [integrationID, userID, at.storedValue])
            return db.changesCount == 1
        }
    }

    public func revokeGrant(integrationID: String, userID: String) async throws -> Bool {
        try await pool.write { db in
            try db.cachedStatement(sql: "DELETE FROM integration_grants WHERE integration_id = ? AND user_id = ?").execute(arguments: [
                integrationID, userID,
            ])
            guard db.changesCount == 1 else { return false }
            // Codes issued under the grant die with it.
            try db.cachedStatement(sql: "DELETE FROM enrollments WHERE integration_id = ? AND user_id = ? AND used_at IS NULL").execute(
                arguments: [integrationID, userID])
            return true
        }
    }

    public func device(id: String) async throws -> Device? {
        try await pool.read { db in
            try Row.fetchOne(db.cachedStatement(sql: "SELECT * FROM devices WHERE id = ?"), arguments: [id]).map(Device.init(row:))
        }
    }

    public func createEnrollment(
        codeHash: String, userID: String, integrationID: String, apiKeyHash: String?, createdAt: Date, expiresAt: Date
    ) async throws -> Bool {
        try await pool.write { db in
            try db.cachedStatement(
                sql: """
                    INSERT INTO enrollments (code_hash, user_id, integration_id, created_at, expires_at)
                    SELECT ?, ?, ?, ?, ? WHERE EXISTS (
                        SELECT 1 FROM integrations WHERE id = ? AND enabled AND (? IS NULL OR api_key_hash = ?))
                    """
            ).execute(arguments: [
                codeHash, userID, integrationID, createdAt.storedValue, expiresAt.storedValue, integrationID, apiKeyHash, apiKeyHash,
            ])
            return db.changesCount == 1
        }
    }

    public func enroll(
        codeHash: String, now: Date, maxDevices: Int, registration: @escaping @Sendable (_ userID: String) -> DeviceRegistration
    ) async throws -> (device: Device, integrationID: String)? {
        try await pool.write { db in
            guard
                let row = try Row.fetchOne(
                    db.cachedStatement(
                        sql: """
                            SELECT e.user_id, e.integration_id FROM enrollments e
                            JOIN integrations i ON i.id = e.integration_id AND i.enabled
                            JOIN users u ON u.id = e.user_id
                            WHERE e.code_hash = ? AND e.used_at IS NULL AND e.expires_at > ? AND \(Self.reaches("e.integration_id"))
                            """),
                    arguments: [codeHash, now.storedValue])
            else { return nil }
            try db.cachedStatement(sql: "UPDATE enrollments SET used_at = ? WHERE code_hash = ? AND used_at IS NULL").execute(arguments: [
                now.storedValue, codeHash,
            ])
            guard db.changesCount == 1 else { return nil }
            let userID: String = row["user_id"]
            // A throw here (too many devices) rolls the whole transaction back: the code stays usable.
            let device = try Self.registerDevice(registration(userID), maxDevices: maxDevices, db)
            return (device, row["integration_id"])
        }
    }

    public func idempotencyRecord(integrationID: String, key: String, since: Date) async throws -> IdempotencyRecord? {
        try await pool.read { db in
            try Row.fetchOne(
                db.cachedStatement(sql: "SELECT * FROM idempotency_keys WHERE integration_id = ? AND key = ? AND created_at > ?"),
                arguments: [integrationID, key, since.storedValue]
            ).map { row in
                IdempotencyRecord(
                    integrationID: row["integration_id"], key: row["key"], requestHash: row["request_hash"], approvalID: row["approval_id"],
                    answer: row["answer"], createdAt: Date(stored: row["created_at"]))
            }
        }
    }

    public func webhookDeliveries(failedOnly: Bool, limit: Int) async throws -> [OutboxEntry] {
        let condition =
            failedOnly ? "AND (state IN ('failed', 'dropped') OR (state = 'pending' AND attempts > 0 AND last_error IS NOT NULL))" : ""
        return try await pool.read { db in
            try Row.fetchAll(
                db.cachedStatement(sql: "SELECT * FROM outbox WHERE kind = 'webhook' \(condition) ORDER BY created_at DESC, rowid DESC LIMIT ?"),
                arguments: [limit]
            ).compactMap(OutboxEntry.init(row:))
        }
    }

    public func redeliverWebhook(eventID: String, now: Date) async throws -> String? {
        try await pool.write { db in
            try String.fetchOne(
                db.cachedStatement(
                    sql: """
                        UPDATE outbox SET state = 'pending', next_attempt_at = ?, deadline = ?, attempts = 0, lease_until = NULL,
                            last_error = NULL, finished_at = NULL
                        WHERE id = ? AND kind = 'webhook' AND payload IS NOT NULL AND (state != 'pending' OR lease_until IS NULL)
                        RETURNING reference
                        """),
                arguments: [now.storedValue, now.addingTimeInterval(WebhookEvent.deliveryWindow).storedValue, eventID])
        }
    }

    /// Removes enrollment codes, idempotency keys and used proofs past their use; returns how many.
    static func pruneIntegrationRecords(now: Date, _ db: Database) throws -> Int {
        try db.cachedStatement(sql: "DELETE FROM enrollments WHERE expires_at < ?").execute(arguments: [now.storedValue])
        let enrollments = db.changesCount
        try db.cachedStatement(sql: "DELETE FROM idempotency_keys WHERE created_at < ?").execute(arguments: [
            now.addingTimeInterval(-IdempotencyRecord.window).storedValue
        ])
        let keys = db.changesCount
        try db.cachedStatement(sql: "DELETE FROM used_proofs WHERE expires_at <= ?").execute(arguments: [now.storedValue])
        return enrollments + keys + db.changesCount
    }
}

extension Integration {
    init(row: Row) throws {
        self.init(
            id: row["id"], name: row["name"], webhookURL: row["webhook_url"], webhookSecret: row["webhook_secret"], enabled: row["enabled"],
            createdAt: Date(stored: row["created_at"]), previousWebhookSecret: row["webhook_secret_previous"],
            previousWebhookSecretUntil: (row["webhook_secret_previous_until"] as Double?).map(Date.init(stored:)))
    }
}

extension OutboxEntry {
    init?(row: Row) {
        guard let kind = OutboxKind(rawValue: row["kind"]) else { return nil }
        self.init(
            id: row["id"], kind: kind, reference: row["reference"], state: row["state"], attempts: row["attempts"],
            createdAt: Date(stored: row["created_at"]), nextAttemptAt: Date(stored: row["next_attempt_at"]),
            finishedAt: (row["finished_at"] as Double?).map(Date.init(stored:)), lastError: row["last_error"],
            payload: kind == .webhook ? row["payload"] : nil)
    }
}

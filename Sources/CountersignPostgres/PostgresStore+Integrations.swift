import CountersignCore
import CountersignSQL
import Foundation
import PostgresNIO

extension PostgresStore: IntegrationStore {
    public func createIntegration(_ integration: Integration, apiKeyHash: String) async throws {
        let inserted = try await rows(
            """
            INSERT INTO integrations (id, name, api_key_hash, webhook_url, webhook_secret, enabled, created_at)
            VALUES (\(integration.id), \(integration.name), \(apiKeyHash), \(integration.webhookURL), \(integration.webhookSecret),
                \(integration.enabled), \(integration.createdAt.stored))
            ON CONFLICT (name) DO NOTHING RETURNING id
            """
        ).count
        if inserted == 0 { throw IntegrationError.nameTaken }
    }

    public func integrations() async throws -> [Integration] {
        try await rows("SELECT * FROM integrations ORDER BY name").map(Integration.init(row:))
    }

    public func integration(id: String) async throws -> Integration? {
        try await rows("SELECT * FROM integrations WHERE id = \(id)").first.map(Integration.init(row:))
    }

    public func integration(apiKeyHash: String) async throws -> Integration? {
        try await rows("SELECT * FROM integrations WHERE api_key_hash = \(apiKeyHash)").first.map(Integration.init(row:))
    }

    public func rotateIntegrationKey(id: String, apiKeyHash: String) async throws -> Bool {
        try await transaction { connection in
            guard try await connection.run("UPDATE integrations SET api_key_hash = \(apiKeyHash) WHERE id = \(id) RETURNING id", self.logger) == 1
            else { return false }
            try await Self.voidEnrollments(integrationID: id, connection, self.logger)
            return true
        }
    }

    /// Unused codes of an integration stop working (disabled, or its key rotated).
    static func voidEnrollments(integrationID: String, _ connection: PostgresConnection, _ logger: Logger) async throws {
        try await connection.run("DELETE FROM enrollments WHERE integration_id = \(integrationID) AND used_at IS NULL RETURNING code_hash", logger)
    }

    public func rotateWebhookSecret(integrationID: String, secret: String, previousUntil: Date) async throws -> Bool {
        try await rows(
            """
            UPDATE integrations SET webhook_secret_previous = webhook_secret, webhook_secret_previous_until = \(previousUntil.stored),
                webhook_secret = \(secret)
            WHERE id = \(integrationID) AND webhook_url IS NOT NULL AND webhook_secret IS NOT NULL RETURNING id
            """
        ).count == 1
    }

    public func setWebhook(integrationID: String, url: String?, secret: String?) async throws -> Bool {
        // A secret replaced here (`--rotate-secret`, or the webhook removed) stops at once, the previous one too.
        try await rows(
            """
            UPDATE integrations SET webhook_url = \(url),
                webhook_secret_previous = CASE WHEN webhook_secret IS NOT DISTINCT FROM \(secret) THEN webhook_secret_previous END,
                webhook_secret_previous_until = CASE WHEN webhook_secret IS NOT DISTINCT FROM \(secret) THEN webhook_secret_previous_until END,
                webhook_secret = \(secret)
            WHERE id = \(integrationID) RETURNING id
            """
        )
        .count == 1
    }

    public func setIntegrationEnabled(id: String, enabled: Bool) async throws -> Bool {
        try await transaction { connection in
            guard try await connection.run("UPDATE integrations SET enabled = \(enabled) WHERE id = \(id) RETURNING id", self.logger) == 1 else {
                return false
            }
            if !enabled { try await Self.voidEnrollments(integrationID: id, connection, self.logger) }
            return true
        }
    }

    public func ensureUser(email: String, integrationID: String) async throws -> (user: User, created: Bool) {
        let email = User.normalize(email: email)
        // No password: the empty hash matches none (login checks a decoy instead).
        let user = User(id: SecureToken.recordID(), email: email, passwordHash: "", createdAt: Date())
        return try await transaction { connection in
            let inserted = try await connection.run(
                """
                INSERT INTO users (id, email, password_hash, created_at, owner_integration_id)
                VALUES (\(user.id), \(email), '', \(user.createdAt.stored), \(integrationID))
                ON CONFLICT (email) DO NOTHING RETURNING id
                """, self.logger)
            if inserted == 1 { return (user, true) }
            guard let existing = try await connection.rows("SELECT * FROM users WHERE email = \(email)", self.logger).first else {
                throw AccountError.unknownUser
            }
            return (try User(row: existing), false)
        }
    }

    public func device(id: String) async throws -> Device? {
        try await rows("SELECT * FROM devices WHERE id = \(id)").first.map(Device.init(row:))
    }

    public func createEnrollment(
        codeHash: String, userID: String, integrationID: String, apiKeyHash: String?, createdAt: Date, expiresAt: Date
    ) async throws -> Bool {
        // One statement: a rotation or a disable that commits first leaves nothing to insert.
        try await rows(
            """
            INSERT INTO enrollments (code_hash, user_id, integration_id, created_at, expires_at)
            SELECT \(codeHash), \(userID), \(integrationID), \(createdAt.stored), \(expiresAt.stored)
            WHERE EXISTS (
                SELECT 1 FROM integrations WHERE id = \(integrationID) AND enabled
                    AND (\(apiKeyHash)::text IS NULL OR api_key_hash = \(apiKeyHash)))
            RETURNING code_hash
            """
        ).count == 1
    }

    public func enroll(
        codeHash: String, now: Date, maxDevices: Int, registration: @escaping @Sendable (_ userID: String) -> DeviceRegistration
    ) async throws -> (device: Device, integrationID: String)? {
        try await transaction { connection in
            // One conditional update: of racing redeemers, one gets the row.
            guard
                let row = try await connection.rows(
                    """
                    UPDATE enrollments e SET used_at = \(now.stored)
                    FROM integrations i, users u
                    WHERE e.code_hash = \(codeHash) AND e.used_at IS NULL AND e.expires_at > \(now.stored)
                        AND i.id = e.integration_id AND i.enabled AND u.id = e.user_id
                        AND (u.owner_integration_id = e.integration_id
                            OR EXISTS (SELECT 1 FROM integration_grants g WHERE g.user_id = u.id AND g.integration_id = e.integration_id))
                    RETURNING e.user_id, e.integration_id
                    """, self.logger
                ).first
            else { return nil }
            // A throw here (too many devices) rolls the whole transaction back: the code stays usable.
            let device = try await Self.registerDevice(registration(try row.get("user_id")), maxDevices: maxDevices, connection, self.logger)
            return (device, try row.get("integration_id"))
        }
    }

    public func user(email: String, reachableBy integrationID: String) async throws -> User? {
        try await rows(
            """
            SELECT * FROM users u WHERE email = \(User.normalize(email: email)) AND (u.owner_integration_id = \(integrationID)
                OR EXISTS (SELECT 1 FROM integration_grants g WHERE g.user_id = u.id AND g.integration_id = \(integrationID)))
            """
        ).first.map(User.init(row:))
    }

    public func user(email: String, ownedBy integrationID: String) async throws -> User? {
        try await rows("SELECT * FROM users WHERE email = \(User.normalize(email: email)) AND owner_integration_id = \(integrationID)")
            .first.map(User.init(row:))
    }

    public func grantUser(integrationID: String, userID: String, at: Date) async throws -> Bool {
        try await rows(
            """
            INSERT INTO integration_grants (integration_id, user_id, created_at) VALUES (\(integrationID), \(userID), \(at.stored))
            ON CONFLICT DO NOTHING RETURNING user_id
            """
        ).count == 1
    }

    public func revokeGrant(integrationID: String, userID: String) async throws -> Bool {
        try await transaction { connection in
            guard
                try await connection.run(
                    "DELETE FROM integration_grants WHERE integration_id = \(integrationID) AND user_id = \(userID) RETURNING user_id", self.logger)
                    == 1
            else { return false }
            // Codes issued under the grant die with it.
            try await connection.run(
                """
                DELETE FROM enrollments WHERE integration_id = \(integrationID) AND user_id = \(userID) AND used_at IS NULL RETURNING code_hash
                """, self.logger)
            return true
        }
    }

    public func idempotencyRecord(integrationID: String, key: String, since: Date) async throws -> IdempotencyRecord? {
        try await rows(
            "SELECT * FROM idempotency_keys WHERE integration_id = \(integrationID) AND key = \(key) AND created_at > \(since.stored)"
        ).first.map { row in
            IdempotencyRecord(
                integrationID: try row.get("integration_id"), key: try row.get("key"), requestHash: try row.get("request_hash"),
                approvalID: try row.get("approval_id"), answer: try row.get("answer"), createdAt: try row.date("created_at"))
        }
    }

    public func webhookDeliveries(failedOnly: Bool, limit: Int) async throws -> [OutboxEntry] {
        try await rows(
            """
            SELECT * FROM outbox WHERE kind = 'webhook'
                AND (NOT \(failedOnly) OR state IN ('failed', 'dropped') OR (state = 'pending' AND attempts > 0 AND last_error IS NOT NULL))
            ORDER BY created_at DESC, seq DESC LIMIT \(limit)
            """
        ).compactMap(OutboxEntry.init(row:))
    }

    public func redeliverWebhook(eventID: String, now: Date) async throws -> String? {
        try await rows(
            """
            UPDATE outbox SET state = 'pending', next_attempt_at = \(now.stored),
                deadline = \(now.addingTimeInterval(WebhookEvent.deliveryWindow).stored), attempts = 0, lease_until = NULL,
                lease_owner = NULL, last_error = NULL, finished_at = NULL
            WHERE id = \(eventID) AND kind = 'webhook' AND payload IS NOT NULL AND (state != 'pending' OR lease_until IS NULL)
            RETURNING reference
            """
        ).first.map { try $0[0].decode(String.self) }
    }

    /// Removes enrollment codes, idempotency keys and used proofs past their use; returns how many.
    static func pruneIntegrationRecords(now: Date, _ connection: PostgresConnection, _ logger: Logger) async throws -> Int {
        let enrollments = try await connection.run("DELETE FROM enrollments WHERE expires_at < \(now.stored) RETURNING code_hash", logger)
        let keys = try await connection.run(
            "DELETE FROM idempotency_keys WHERE created_at < \(now.addingTimeInterval(-IdempotencyRecord.window).stored) RETURNING key", logger)
        let proofs = try await connection.run("DELETE FROM used_proofs WHERE expires_at <= \(now.stored) RETURNING device_id", logger)
        return enrollments + keys + proofs
    }
}

extension Integration {
    init(row: PostgresRandomAccessRow) throws {
        self.init(
            id: try row.get("id"), name: try row.get("name"), webhookURL: try row.get("webhook_url"), webhookSecret: try row.get("webhook_secret"),
            enabled: try row.get("enabled"), createdAt: try row.date("created_at"),
            previousWebhookSecret: try row.get("webhook_secret_previous"),
            previousWebhookSecretUntil: try row.optionalDate("webhook_secret_previous_until"))
    }
}

extension OutboxEntry {
    init?(row: PostgresRandomAccessRow) throws {
        guard let kind = OutboxKind(rawValue: try row.get("kind")) else { return nil }
        self.init(
            id: try row.get("id"), kind: kind, reference: try row.get("reference"), state: try row.get("state"),
            attempts: Int(try row.get("attempts", as: Int32.self)), createdAt: try row.date("created_at"),
            nextAttemptAt: try row.date("next_attempt_at"), finishedAt: try row.optionalDate("finished_at"),
            lastError: try row.get("last_error"), payload: kind == .webhook ? try row.get("payload", as: Data?.self) : nil)
    }
}

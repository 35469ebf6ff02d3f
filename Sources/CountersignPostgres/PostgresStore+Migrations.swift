import CountersignCore
import Foundation
import NIOPosix
import PostgresNIO

extension PostgresStore {
    /// The schema, in the same versions as the SQLite file's (GRDB's
    /// migrator there), each a list of statements. What only a cluster needs
    /// (shared rate counters, the outbox's order and lease holder) comes with
    /// the version of the feature it serves.
    public static let migrations: [(identifier: String, statements: [String])] = [
        (
            "v1-accounts-and-approvals",
            [
                """
                CREATE TABLE users (
                    id text PRIMARY KEY, email text NOT NULL UNIQUE, password_hash text NOT NULL, created_at double precision NOT NULL)
                """,
                """
                CREATE TABLE devices (
                    id text PRIMARY KEY, user_id text NOT NULL REFERENCES users(id) ON DELETE CASCADE, name text NOT NULL,
                    platform text NOT NULL, fcm_token text, push_enabled boolean NOT NULL, api_key_hash text NOT NULL UNIQUE,
                    created_at double precision NOT NULL)
                """,
                "CREATE INDEX devices_by_user ON devices(user_id)",
                "CREATE INDEX devices_by_token ON devices(fcm_token)",
                """
                CREATE TABLE approval_requests (
                    id text PRIMARY KEY, user_id text REFERENCES users(id) ON DELETE CASCADE, subject text NOT NULL, action text NOT NULL,
                    state text NOT NULL CHECK (state IN ('pending','approved','denied','expired','cancelled','completed')),
                    created_at double precision NOT NULL, expires_at double precision NOT NULL, completion_window double precision NOT NULL,
                    complete_by double precision, updated_at double precision NOT NULL, number_code_salt text, number_code_hash text,
                    new_password_hash text, requester_ip text NOT NULL, requester_user_agent text, responding_device_id text)
                """,
                "CREATE INDEX approvals_live ON approval_requests(state) WHERE state IN ('pending','approved')",
                "CREATE INDEX approvals_by_subject ON approval_requests(subject, action, state)",
                "CREATE INDEX approvals_pending_by_user ON approval_requests(user_id) WHERE state = 'pending'",
            ]
        ),
        (
            "v2-fraud-silence-and-audit",
            [
                "ALTER TABLE users ADD COLUMN silenced_until double precision",
                """
                CREATE TABLE audit_events (
                    id bigserial PRIMARY KEY, at double precision NOT NULL, kind text NOT NULL, user_id text, email text, device_id text,
                    request_ref text, ip text, user_agent text, detail text)
                """,
                "CREATE INDEX audit_by_time ON audit_events(at)",
                "CREATE INDEX audit_by_user ON audit_events(user_id, at)",
                // Every node counts in the same rows; unlogged: a crash of the server may reset them.
                """
                CREATE UNLOGGED TABLE rate_counters (
                    name text NOT NULL, key text NOT NULL, opened double precision NOT NULL, count integer NOT NULL,
                    PRIMARY KEY (name, key))
                """,
            ]
        ),
        ("v3-request-version", ["ALTER TABLE approval_requests ADD COLUMN version integer NOT NULL DEFAULT 0"]),
        (
            "v4-email-reset-and-outbox",
            [
                """
                CREATE TABLE email_resets (
                    id text PRIMARY KEY, user_id text REFERENCES users(id) ON DELETE CASCADE, email text NOT NULL, code_hash text NOT NULL,
                    token_hash text NOT NULL UNIQUE, created_at double precision NOT NULL, expires_at double precision NOT NULL,
                    tries integer NOT NULL DEFAULT 0, state text NOT NULL CHECK (state IN ('active','used','replaced')),
                    finished_at double precision)
                """,
                "CREATE INDEX email_resets_by_email ON email_resets(email, state)",
                // `seq` orders a webhook's events (SQLite's rowid); `lease_owner` is the node holding the lease.
                """
                CREATE TABLE outbox (
                    id text PRIMARY KEY, seq bigserial NOT NULL, kind text NOT NULL, reference text, user_id text, payload bytea,
                    state text NOT NULL CHECK (state IN ('pending','delivered','failed','dropped')), created_at double precision NOT NULL,
                    next_attempt_at double precision NOT NULL, deadline double precision NOT NULL, attempts integer NOT NULL DEFAULT 0,
                    lease_until double precision, lease_owner text, last_error text, finished_at double precision)
                """,
                "CREATE INDEX outbox_due ON outbox(next_attempt_at) WHERE state = 'pending'",
                "CREATE INDEX outbox_by_reference ON outbox(reference, seq) WHERE state = 'pending'",
            ]
        ),
        (
            "v5-device-keys",
            [
                "ALTER TABLE devices ADD COLUMN public_key text",
                "ALTER TABLE audit_events ADD COLUMN proof text",
                "ALTER TABLE audit_events ADD COLUMN proof_key text",
            ]
        ),
        (
            "v6-integrations",
            [
                """
                CREATE TABLE integrations (
                    id text PRIMARY KEY, name text NOT NULL UNIQUE, api_key_hash text NOT NULL UNIQUE, webhook_url text,
                    webhook_secret text, enabled boolean NOT NULL DEFAULT true, created_at double precision NOT NULL)
                """,
                "ALTER TABLE approval_requests ADD COLUMN integration_id text",
                "ALTER TABLE approval_requests ADD COLUMN prompt text",
                "ALTER TABLE approval_requests ADD COLUMN device_key_bound boolean",
                "CREATE INDEX approvals_by_integration ON approval_requests(integration_id) WHERE integration_id IS NOT NULL",
                """
                CREATE TABLE enrollments (
                    code_hash text PRIMARY KEY, user_id text NOT NULL REFERENCES users(id) ON DELETE CASCADE, integration_id text NOT NULL,
                    created_at double precision NOT NULL, expires_at double precision NOT NULL, used_at double precision)
                """,
                """
                CREATE TABLE idempotency_keys (
                    integration_id text NOT NULL, key text NOT NULL, request_hash text NOT NULL, approval_id text NOT NULL,
                    answer bytea NOT NULL, created_at double precision NOT NULL, PRIMARY KEY (integration_id, key))
                """,
                "CREATE INDEX idempotency_by_time ON idempotency_keys(created_at)",
                "CREATE INDEX outbox_by_time ON outbox(created_at)",
                "ALTER TABLE devices ADD COLUMN last_seen_at double precision",
            ]
        ),
        (
            // Owners, grants, devices that may answer resets, used proofs (see the SQLite store).
            "v7-trust",
            [
                "ALTER TABLE users ADD COLUMN owner_integration_id text",
                "ALTER TABLE devices ADD COLUMN may_approve_resets boolean NOT NULL DEFAULT true",
                """
                CREATE TABLE integration_grants (
                    integration_id text NOT NULL, user_id text NOT NULL REFERENCES users(id) ON DELETE CASCADE,
                    created_at double precision NOT NULL, PRIMARY KEY (integration_id, user_id))
                """,
                """
                CREATE TABLE used_proofs (
                    device_id text NOT NULL, thumbprint text NOT NULL, issued_at bigint NOT NULL, expires_at double precision NOT NULL,
                    PRIMARY KEY (device_id, thumbprint, issued_at))
                """,
                """
                UPDATE users SET owner_integration_id = (
                    SELECT i.id FROM audit_events a JOIN integrations i ON a.detail = 'integration ' || i.name
                    WHERE a.kind = 'user_created' AND a.user_id = users.id ORDER BY a.at LIMIT 1)
                WHERE password_hash = ''
                """,
                """
                UPDATE devices SET may_approve_resets = false
                WHERE EXISTS (SELECT 1 FROM audit_events e WHERE e.kind = 'device_enrolled' AND e.device_id = devices.id
                    AND NOT EXISTS (SELECT 1 FROM audit_events l WHERE l.kind IN ('login_ok', 'key_refreshed')
                        AND l.device_id = devices.id AND l.at > e.at))
                """,
            ]
        ),
        (
            // Secrets in base64, as Standard Webhooks read them (see the SQLite store).
            "v8-standard-webhooks",
            [
                """
                UPDATE integrations
                SET webhook_secret = 'whsec_' || replace(replace(substr(webhook_secret, 7), '-', '+'), '_', '/') || '='
                WHERE substr(webhook_secret, 1, 6) = 'whsec_' AND length(webhook_secret) = 49
                """,
                "ALTER TABLE integrations ADD COLUMN webhook_secret_previous text",
                "ALTER TABLE integrations ADD COLUMN webhook_secret_previous_until double precision",
            ]
        ),
        (
            // Offline secrets and steps, how a request was answered, wrong codes, bypass codes (see the SQLite store).
            "v9-offline-codes",
            [
                "ALTER TABLE devices ADD COLUMN offline_secret bytea",
                "ALTER TABLE devices ADD COLUMN offline_step bigint",
                "ALTER TABLE approval_requests ADD COLUMN answered_via text",
                "ALTER TABLE approval_requests ADD COLUMN wrong_codes integer NOT NULL DEFAULT 0",
                "UPDATE approval_requests SET answered_via = 'push' WHERE responding_device_id IS NOT NULL",
                """
                CREATE TABLE bypass_codes (
                    user_id text NOT NULL REFERENCES users(id) ON DELETE CASCADE, code_hash text NOT NULL,
                    for_password_reset boolean NOT NULL, created_at double precision NOT NULL, expires_at double precision NOT NULL,
                    used_at double precision, PRIMARY KEY (user_id, code_hash))
                """,
            ]
        ),
        (
            // The same change as SQLite's v10-push-providers.
            "v10-push-providers",
            [
                "ALTER TABLE devices ADD COLUMN push_provider text NOT NULL DEFAULT 'fcm'",
                "ALTER TABLE devices ADD COLUMN push_options text",
            ]
        ),
        (
            // The same change as SQLite's v11-codes-and-reach.
            "v11-codes-and-reach",
            [
                "ALTER TABLE users ADD COLUMN wrong_codes integer NOT NULL DEFAULT 0",
                "ALTER TABLE users ADD COLUMN wrong_codes_since double precision",
                "ALTER TABLE integrations ADD COLUMN prompt_all_users boolean NOT NULL DEFAULT false",
                """
                INSERT INTO audit_events (at, kind, user_id, detail)
                SELECT extract(epoch FROM now())::double precision, 'ownership_ended', u.id,
                    'integration ' || i.name || '; the user had a password before this version'
                FROM users u JOIN integrations i ON i.id = u.owner_integration_id WHERE u.password_hash != ''
                """,
                """
                DELETE FROM enrollments WHERE used_at IS NULL AND EXISTS (
                    SELECT 1 FROM users u WHERE u.id = enrollments.user_id AND u.password_hash != ''
                        AND u.owner_integration_id = enrollments.integration_id)
                """,
                "UPDATE users SET owner_integration_id = NULL WHERE password_hash != '' AND owner_integration_id IS NOT NULL",
            ]
        ),
        // The same change as SQLite's v12-sealed-push.
        ("v12-sealed-push", ["ALTER TABLE devices ADD COLUMN seal_key text"]),
        (
            "v13-webhook-self-service",
            [
                "ALTER TABLE outbox ADD COLUMN integration_id text",
                """
                UPDATE outbox SET integration_id = a.integration_id FROM approval_requests a
                WHERE outbox.kind = 'webhook' AND a.id = outbox.reference
                """,
                "CREATE INDEX outbox_by_integration ON outbox(integration_id, created_at) WHERE integration_id IS NOT NULL",
                "ALTER TABLE integrations ADD COLUMN webhook_disabled_at double precision",
                "ALTER TABLE integrations ADD COLUMN webhook_disabled_reason text",
                "ALTER TABLE integrations ADD COLUMN webhook_public_only boolean NOT NULL DEFAULT false",
                "CREATE INDEX audit_by_email ON audit_events(email) WHERE email IS NOT NULL",
            ]
        ),
    ]

    /// Applies the missing versions in one transaction under an advisory lock:
    /// when several nodes start at once, one migrates and the others wait, then find nothing to do.
    func migrate() async throws {
        let applied: [String] = try await transaction { connection in
            try await connection.run("SELECT pg_advisory_xact_lock(\(Self.migrationLock))", self.logger)
            try await connection.run(
                "CREATE TABLE IF NOT EXISTS schema_migrations (identifier text PRIMARY KEY, applied_at double precision NOT NULL)", self.logger)
            let done = Set(
                try await connection.rows("SELECT identifier FROM schema_migrations", self.logger).map { try $0.get("identifier", as: String.self) })
            let unknown = done.subtracting(Self.migrations.map(\.identifier))
            guard unknown.isEmpty else {
                throw NewerDatabaseError(
                    database: self.configuration.redacted, unknown: unknown.sorted(), newestKnown: Self.migrations.last?.identifier ?? "")
            }
            var applied: [String] = []
            for migration in Self.migrations where !done.contains(migration.identifier) {
                for statement in migration.statements {
                    try await connection.run(PostgresQuery(unsafeSQL: statement), self.logger)
                }
                try await connection.run(
                    "INSERT INTO schema_migrations (identifier, applied_at) VALUES (\(migration.identifier), \(Date().stored))", self.logger)
                applied.append(migration.identifier)
            }
            return applied
        }
        if !applied.isEmpty {
            eventLogger.info("database migrated", metadata: ["database": "\(configuration.redacted)", "migrations": "\(applied)"])
        }
    }

    /// The advisory lock key of migrations (any constant; "countersign" in ASCII, truncated).
    static let migrationLock: Int64 = 0x636f_756e_7465_7273
}

extension PostgresStore {
    /// The schema versions of the database, read on one connection without migrating anything.
    public static func migrationStatus(configuration: PostgresConfiguration, logger: Logger) async throws -> MigrationStatus {
        let connection = try await PostgresConnection.connect(
            on: MultiThreadedEventLoopGroup.singleton.any(),
            configuration: try configuration.connectionConfiguration(applicationName: "countersign-migrate-status"), id: 0, logger: logger
        ).get()
        defer { Task { try? await connection.close() } }
        var applied: Set<String> = []
        let exists = try await connection.query("SELECT to_regclass('schema_migrations') IS NOT NULL AS present", logger: logger)
        for try await present in exists.decode(Bool.self) where present {
            let rows = try await connection.query("SELECT identifier FROM schema_migrations", logger: logger)
            for try await identifier in rows.decode(String.self) { applied.insert(identifier) }
        }
        return MigrationStatus(known: migrations.map(\.identifier), applied: applied)
    }
}

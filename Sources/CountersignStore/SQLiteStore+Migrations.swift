import CountersignCore
import GRDB

extension SQLiteStore {
    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1-accounts-and-approvals") { db in
            try db.execute(
                sql: """
                    CREATE TABLE users (
                        id TEXT PRIMARY KEY NOT NULL,
                        email TEXT NOT NULL UNIQUE,
                        password_hash TEXT NOT NULL,
                        created_at REAL NOT NULL
                    );
                    CREATE TABLE devices (
                        id TEXT PRIMARY KEY NOT NULL,
                        user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
                        name TEXT NOT NULL,
                        platform TEXT NOT NULL,
                        fcm_token TEXT,
                        push_enabled INTEGER NOT NULL,
                        api_key_hash TEXT NOT NULL UNIQUE,
                        created_at REAL NOT NULL
                    );
                    CREATE INDEX devices_by_user ON devices(user_id);
                    CREATE INDEX devices_by_token ON devices(fcm_token);
                    CREATE TABLE approval_requests (
                        id TEXT PRIMARY KEY NOT NULL,
                        user_id TEXT REFERENCES users(id) ON DELETE CASCADE,
                        subject TEXT NOT NULL,
                        action TEXT NOT NULL,
                        state TEXT NOT NULL CHECK (state IN ('pending','approved','denied','expired','cancelled','completed')),
                        created_at REAL NOT NULL,
                        expires_at REAL NOT NULL,
                        completion_window REAL NOT NULL,
                        complete_by REAL,
                        updated_at REAL NOT NULL,
                        number_code_salt TEXT,
                        number_code_hash TEXT,
                        new_password_hash TEXT,
                        requester_ip TEXT NOT NULL,
                        requester_user_agent TEXT,
                        responding_device_id TEXT
                    );
                    CREATE INDEX approvals_live ON approval_requests(state) WHERE state IN ('pending','approved');
                    CREATE INDEX approvals_by_subject ON approval_requests(subject, action, state);
                    """
            )
        }
        migrator.registerMigration("v2-fraud-silence-and-audit") { db in
            try db.execute(
                sql: """
                    ALTER TABLE users ADD COLUMN silenced_until REAL;
                    CREATE TABLE audit_events (
                        id INTEGER PRIMARY KEY AUTOINCREMENT,
                        at REAL NOT NULL,
                        kind TEXT NOT NULL,
                        user_id TEXT,
                        email TEXT,
                        device_id TEXT,
                        request_ref TEXT,
                        ip TEXT,
                        user_agent TEXT,
                        detail TEXT
                    );
                    CREATE INDEX audit_by_time ON audit_events(at);
                    CREATE INDEX audit_by_user ON audit_events(user_id, at);
                    """
            )
        }
        migrator.registerMigration("v3-request-version") { db in
            // Counts a request's transitions, so the broker can tell a newer row from a stale one.
            try db.execute(sql: "ALTER TABLE approval_requests ADD COLUMN version INTEGER NOT NULL DEFAULT 0")
        }
        migrator.registerMigration("v4-email-reset-and-outbox") { db in
            try db.execute(
                sql: """
                    CREATE TABLE email_resets (
                        id TEXT PRIMARY KEY NOT NULL,
                        user_id TEXT REFERENCES users(id) ON DELETE CASCADE,
                        email TEXT NOT NULL,
                        code_hash TEXT NOT NULL,
                        token_hash TEXT NOT NULL UNIQUE,
                        created_at REAL NOT NULL,
                        expires_at REAL NOT NULL,
                        tries INTEGER NOT NULL DEFAULT 0,
                        state TEXT NOT NULL CHECK (state IN ('active','used','replaced')),
                        finished_at REAL
                    );
                    CREATE INDEX email_resets_by_email ON email_resets(email, state);
                    CREATE TABLE outbox (
                        id TEXT PRIMARY KEY NOT NULL,
                        kind TEXT NOT NULL,
                        reference TEXT,
                        user_id TEXT,
                        payload BLOB,
                        state TEXT NOT NULL CHECK (state IN ('pending','delivered','failed','dropped')),
                        created_at REAL NOT NULL,
                        next_attempt_at REAL NOT NULL,
                        deadline REAL NOT NULL,
                        attempts INTEGER NOT NULL DEFAULT 0,
                        lease_until REAL,
                        last_error TEXT,
                        finished_at REAL
                    );
                    CREATE INDEX outbox_due ON outbox(next_attempt_at) WHERE state = 'pending';
                    CREATE INDEX outbox_by_reference ON outbox(reference) WHERE state = 'pending';
                    """
            )
        }
        migrator.registerMigration("v5-device-keys") { db in
            // A device's P-256 key (JWK), and the signed answer kept with the audit event it proves.
            try db.execute(
                sql: """
                    ALTER TABLE devices ADD COLUMN public_key TEXT;
                    ALTER TABLE audit_events ADD COLUMN proof TEXT;
                    ALTER TABLE audit_events ADD COLUMN proof_key TEXT;
                    """)
        }
        migrator.registerMigration("v6-integrations") { db in
            // Relying services, the approvals they make (what the phone shows is the
            // `prompt` JSON), device enrollment codes and idempotent creates.
            try db.execute(
                sql: """
                    CREATE TABLE integrations (
                        id TEXT PRIMARY KEY NOT NULL,
                        name TEXT NOT NULL UNIQUE,
                        api_key_hash TEXT NOT NULL UNIQUE,
                        webhook_url TEXT,
                        webhook_secret TEXT,
                        enabled INTEGER NOT NULL DEFAULT 1,
                        created_at REAL NOT NULL
                    );
                    ALTER TABLE approval_requests ADD COLUMN integration_id TEXT;
                    ALTER TABLE approval_requests ADD COLUMN prompt TEXT;
                    ALTER TABLE approval_requests ADD COLUMN device_key_bound INTEGER;
                    CREATE INDEX approvals_by_integration ON approval_requests(integration_id) WHERE integration_id IS NOT NULL;
                    CREATE TABLE enrollments (
                        code_hash TEXT PRIMARY KEY NOT NULL,
                        user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
                        integration_id TEXT NOT NULL,
                        created_at REAL NOT NULL,
                        expires_at REAL NOT NULL,
                        used_at REAL
                    );
                    CREATE TABLE idempotency_keys (
                        integration_id TEXT NOT NULL,
                        key TEXT NOT NULL,
                        request_hash TEXT NOT NULL,
                        approval_id TEXT NOT NULL,
                        answer BLOB NOT NULL,
                        created_at REAL NOT NULL,
                        PRIMARY KEY (integration_id, key)
                    );
                    CREATE INDEX idempotency_by_time ON idempotency_keys(created_at);
                    CREATE INDEX outbox_by_time ON outbox(created_at);
                    ALTER TABLE devices ADD COLUMN last_seen_at REAL;
                    """)
        }
        migrator.registerMigration("v7-trust") { db in
            // Who created a user (an integration reaches its own users and those
            // granted to it), whether a device may answer a password reset (a
            // login with the password; an enrollment alone does not), and the
            // proofs of possession already used. Users an integration made
            // before this version get it as owner, and devices it enrolled
            // (without a password login since) lose the reset right, from the
            // audit trail.
            try db.execute(
                sql: """
                    ALTER TABLE users ADD COLUMN owner_integration_id TEXT;
                    ALTER TABLE devices ADD COLUMN may_approve_resets INTEGER NOT NULL DEFAULT 1;
                    CREATE TABLE integration_grants (
                        integration_id TEXT NOT NULL,
                        user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
                        created_at REAL NOT NULL,
                        PRIMARY KEY (integration_id, user_id)
                    );
                    CREATE TABLE used_proofs (
                        device_id TEXT NOT NULL,
                        thumbprint TEXT NOT NULL,
                        issued_at INTEGER NOT NULL,
                        expires_at REAL NOT NULL,
                        PRIMARY KEY (device_id, thumbprint, issued_at)
                    );
                    UPDATE users SET owner_integration_id = (
                        SELECT i.id FROM audit_events a JOIN integrations i ON a.detail = 'integration ' || i.name
                        WHERE a.kind = 'user_created' AND a.user_id = users.id ORDER BY a.at LIMIT 1)
                    WHERE password_hash = '';
                    UPDATE devices SET may_approve_resets = 0
                    WHERE EXISTS (SELECT 1 FROM audit_events e WHERE e.kind = 'device_enrolled' AND e.device_id = devices.id
                        AND NOT EXISTS (SELECT 1 FROM audit_events l WHERE l.kind IN ('login_ok', 'key_refreshed')
                            AND l.device_id = devices.id AND l.at > e.at));
                    """)
        }
        migrator.registerMigration("v8-standard-webhooks") { db in
            // Standard Webhooks read the secret after `whsec_` as base64: secrets
            // written in base64url (32 bytes, 43 characters, no padding) get the
            // same bytes in base64 (`-` → `+`, `_` → `/`, one `=`). A rotated
            // secret keeps signing beside the new one for a while.
            try db.execute(
                sql: """
                    UPDATE integrations
                    SET webhook_secret = 'whsec_' || replace(replace(substr(webhook_secret, 7), '-', '+'), '_', '/') || '='
                    WHERE substr(webhook_secret, 1, 6) = 'whsec_' AND length(webhook_secret) = 49;
                    ALTER TABLE integrations ADD COLUMN webhook_secret_previous TEXT;
                    ALTER TABLE integrations ADD COLUMN webhook_secret_previous_until REAL;
                    """)
        }
        migrator.registerMigration("v9-offline-codes") { db in
            // A device's offline-code secret (sealed with the daemon's key) and the
            // last step a code of it was accepted for; how a request was answered
            // and the wrong codes it took; the bypass codes an operator issued (keyed hashes).
            try db.execute(
                sql: """
                    ALTER TABLE devices ADD COLUMN offline_secret BLOB;
                    ALTER TABLE devices ADD COLUMN offline_step INTEGER;
                    ALTER TABLE approval_requests ADD COLUMN answered_via TEXT;
                    ALTER TABLE approval_requests ADD COLUMN wrong_codes INTEGER NOT NULL DEFAULT 0;
                    UPDATE approval_requests SET answered_via = 'push' WHERE responding_device_id IS NOT NULL;
                    CREATE TABLE bypass_codes (
                        user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
                        code_hash TEXT NOT NULL,
                        for_password_reset INTEGER NOT NULL,
                        created_at REAL NOT NULL,
                        expires_at REAL NOT NULL,
                        used_at REAL,
                        PRIMARY KEY (user_id, code_hash)
                    );
                    """)
        }
        migrator.registerMigration("v10-push-providers") { db in
            // A device's push address names its provider (fcm, apns, webpush); the
            // token column keeps its first name and holds an FCM or APNs token or a
            // Web Push endpoint, and what else the provider needs (APNs topic and
            // environment, Web Push keys) is JSON. Nothing is renamed: on PostgreSQL,
            // nodes of the previous version keep working while a cluster is upgraded.
            try db.execute(
                sql: """
                    ALTER TABLE devices ADD COLUMN push_provider TEXT NOT NULL DEFAULT 'fcm';
                    ALTER TABLE devices ADD COLUMN push_options TEXT;
                    """)
        }
        migrator.registerMigration("v11-codes-and-reach") { db in
            // A user's wrong codes in the current day's window (every route and address
            // counted together), and the integrations the operator let prompt every user.
            // A password ends an integration's ownership: users given one before this
            // version are no integration's from now on (audited), and the codes it issued
            // for them stop working.
            try db.execute(
                sql: """
                    ALTER TABLE users ADD COLUMN wrong_codes INTEGER NOT NULL DEFAULT 0;
                    ALTER TABLE users ADD COLUMN wrong_codes_since REAL;
                    ALTER TABLE integrations ADD COLUMN prompt_all_users INTEGER NOT NULL DEFAULT 0;
                    INSERT INTO audit_events (at, kind, user_id, detail)
                    SELECT (julianday('now') - 2440587.5) * 86400.0, 'ownership_ended', u.id,
                        'integration ' || i.name || '; the user had a password before this version'
                    FROM users u JOIN integrations i ON i.id = u.owner_integration_id WHERE u.password_hash != '';
                    DELETE FROM enrollments WHERE used_at IS NULL AND EXISTS (
                        SELECT 1 FROM users u WHERE u.id = enrollments.user_id AND u.password_hash != ''
                            AND u.owner_integration_id = enrollments.integration_id);
                    UPDATE users SET owner_integration_id = NULL WHERE password_hash != '' AND owner_integration_id IS NOT NULL;
                    """)
        }
        migrator.registerMigration("v12-sealed-push") { db in
            // The key a device's FCM and APNs pushes are sealed to (base64url of a P-256 point).
            try db.execute(sql: "ALTER TABLE devices ADD COLUMN seal_key TEXT;")
        }
        migrator.registerMigration("v13-webhook-self-service") { db in
            // A webhook event names its integration (a test event has no approval to find it by), and a
            // receiver's 410 Gone disables the webhook until a URL is set again. Events already queued
            // are given the integration of their approval. A URL a relying service set itself reaches
            // public addresses only. An erasure finds a user's audit events by email.
            try db.execute(
                sql: """
                    ALTER TABLE outbox ADD COLUMN integration_id TEXT;
                    UPDATE outbox SET integration_id = (SELECT a.integration_id FROM approval_requests a WHERE a.id = outbox.reference)
                        WHERE kind = 'webhook';
                    CREATE INDEX outbox_by_integration ON outbox(integration_id, created_at) WHERE integration_id IS NOT NULL;
                    ALTER TABLE integrations ADD COLUMN webhook_disabled_at REAL;
                    ALTER TABLE integrations ADD COLUMN webhook_disabled_reason TEXT;
                    ALTER TABLE integrations ADD COLUMN webhook_public_only INTEGER NOT NULL DEFAULT 0;
                    CREATE INDEX audit_by_email ON audit_events(email) WHERE email IS NOT NULL;
                    """)
        }
        return migrator
    }
}

extension SQLiteStore {
    /// The schema versions of the file at `path`, read without migrating anything.
    public static func migrationStatus(path: String) throws -> MigrationStatus {
        var configuration = Configuration()
        configuration.readonly = true
        let queue = try DatabaseQueue(path: path, configuration: configuration)
        defer { try? queue.close() }
        let applied = try queue.read { db in try migrator.appliedIdentifiers(db) }
        return MigrationStatus(known: migrator.migrations, applied: applied)
    }
}

import CountersignCore
import CountersignSQL
import Foundation
import GRDB

extension SQLiteStore: IntegrationStore {
    public func createIntegration(_ integration: Integration, apiKeyHash: String) async throws {
        try await pool.write { db in
            if try db.perform(IntegrationSQL.insert(integration, apiKeyHash: apiKeyHash)) == 0 { throw IntegrationError.nameTaken }
        }
    }

    public func integrations() async throws -> [Integration] {
        try await pool.read { db in try db.fetch(IntegrationSQL.all).map(Integration.init(row:)) }
    }

    public func integration(id: String) async throws -> Integration? {
        try await pool.read { db in try db.fetchFirst(IntegrationSQL.integration(id: id)).map(Integration.init(row:)) }
    }

    public func integration(apiKeyHash: String) async throws -> Integration? {
        try readNow { db in try db.fetchFirst(IntegrationSQL.integration(apiKeyHash: apiKeyHash)).map(Integration.init(row:)) }
    }

    public func rotateIntegrationKey(id: String, apiKeyHash: String) async throws -> Bool {
        try await pool.write { db in
            guard try db.perform(IntegrationSQL.setKey(id: id, apiKeyHash: apiKeyHash)) == 1 else { return false }
            try db.perform(IntegrationSQL.voidEnrollments(integrationID: id))
            return true
        }
    }

    public func rotateWebhookSecret(integrationID: String, secret: String, previousUntil: Date) async throws -> Bool {
        try await pool.write { db in
            try db.perform(IntegrationSQL.rotateWebhookSecret(integrationID: integrationID, secret: secret, previousUntil: previousUntil)) == 1
        }
    }

    public func setWebhook(integrationID: String, url: String?, secret: String?, publicOnly: Bool) async throws -> Bool {
        try await pool.write { db in
            try db.perform(IntegrationSQL.setWebhook(integrationID: integrationID, url: url, secret: secret, publicOnly: publicOnly, .sqlite)) == 1
        }
    }

    public func setIntegrationEnabled(id: String, enabled: Bool) async throws -> Bool {
        try await pool.write { db in
            guard try db.perform(IntegrationSQL.setEnabled(id: id, enabled: enabled)) == 1 else { return false }
            if !enabled { try db.perform(IntegrationSQL.voidEnrollments(integrationID: id)) }
            return true
        }
    }

    public func ensureUser(email: String, integrationID: String) async throws -> (user: User, created: Bool) {
        let user = User(id: SecureToken.recordID(), email: User.normalize(email: email), passwordHash: "", createdAt: Date())
        return try await pool.write { db in
            if try db.perform(IntegrationSQL.insertOwnedUser(user, integrationID: integrationID)) == 1 { return (user, true) }
            guard let existing = try db.fetchFirst(AccountSQL.user(email: user.email)) else { throw AccountError.unknownUser }
            return (try User(row: existing), false)
        }
    }

    public func user(email: String, promptableBy integrationID: String) async throws -> (user: User, reached: Bool, enrolled: Bool)? {
        try readNow { db in
            try db.fetchFirst(IntegrationSQL.user(email: User.normalize(email: email), promptableBy: integrationID)).map {
                (try User(row: $0), try $0.get("reached", as: Bool.self), try $0.get("enrolled", as: Bool.self))
            }
        }
    }

    public func integration(_ integrationID: String, reaches userID: String, all: Bool) async throws -> Bool {
        try readNow { db in try db.exists(IntegrationSQL.reaches(integrationID: integrationID, userID: userID, all: all)) }
    }

    public func setPromptsAllUsers(integrationID: String, on: Bool) async throws -> Bool {
        try await pool.write { db in try db.perform(IntegrationSQL.setPromptsAllUsers(id: integrationID, on: on)) == 1 }
    }

    public func user(email: String, ownedBy integrationID: String) async throws -> User? {
        try readNow { db in try db.fetchFirst(IntegrationSQL.user(email: User.normalize(email: email), ownedBy: integrationID)).map(User.init(row:)) }
    }

    public func grantUser(integrationID: String, userID: String, at: Date) async throws -> Bool {
        try await pool.write { db in try db.perform(IntegrationSQL.grant(integrationID: integrationID, userID: userID, at: at)) == 1 }
    }

    public func revokeGrant(integrationID: String, userID: String) async throws -> Bool {
        try await pool.write { db in
            guard try db.perform(IntegrationSQL.revokeGrant(integrationID: integrationID, userID: userID)) == 1 else { return false }
            try db.perform(IntegrationSQL.voidEnrollments(integrationID: integrationID, userID: userID))
            return true
        }
    }

    public func device(id: String) async throws -> Device? {
        try await pool.read { db in try db.fetchFirst(IntegrationSQL.device(id: id)).map(Device.init(row:)) }
    }

    public func createEnrollment(
        codeHash: String, userID: String, integrationID: String, apiKeyHash: String?, createdAt: Date, expiresAt: Date
    ) async throws -> Bool {
        try await pool.write { db in
            try db.perform(
                IntegrationSQL.insertEnrollment(
                    codeHash: codeHash, userID: userID, integrationID: integrationID, apiKeyHash: apiKeyHash, createdAt: createdAt,
                    expiresAt: expiresAt)) == 1
        }
    }

    public func enroll(
        codeHash: String, now: Date, maxDevices: Int, registration: @escaping @Sendable (_ userID: String) -> DeviceRegistration
    ) async throws -> (device: Device, integrationID: String)? {
        try await pool.write { db in
            guard let row = try db.fetchFirst(IntegrationSQL.redeemEnrollment(codeHash: codeHash, now: now)) else { return nil }
            // A throw here (too many devices) rolls the whole transaction back: the code stays usable.
            let device = try Self.registerDevice(registration(try row.get("user_id")), maxDevices: maxDevices, db).device
            return (device, try row.get("integration_id"))
        }
    }

    public func idempotencyRecord(integrationID: String, key: String, since: Date) async throws -> IdempotencyRecord? {
        try await pool.read { db in
            try db.fetchFirst(IntegrationSQL.idempotencyRecord(integrationID: integrationID, key: key, since: since)).map(
                IdempotencyRecord.init(row:))
        }
    }

    public func webhookDeliveries(integrationID: String?, failedOnly: Bool, limit: Int) async throws -> [OutboxEntry] {
        try await pool.read { db in
            try db.fetch(IntegrationSQL.webhookDeliveries(integrationID: integrationID, failedOnly: failedOnly, limit: limit, .sqlite))
                .compactMap(OutboxEntry.init(row:))
        }
    }

    public func redeliverWebhook(eventID: String, integrationID: String?, finishedOnly: Bool, now: Date) async throws -> String? {
        try await pool.write { db in
            try db.fetchFirst(
                IntegrationSQL.redeliverWebhook(eventID: eventID, integrationID: integrationID, finishedOnly: finishedOnly, now: now, .sqlite))?.get(
                    "reference")
        }
    }

    public func queueWebhookPing(_ item: OutboxItem, integrationID: String) async throws -> Bool {
        try await pool.write { db in try db.perform(IntegrationSQL.queuePing(item, integrationID: integrationID)) == 1 }
    }

    public func disableWebhook(integrationID: String, url: String, reason: String, at: Date, audit: AuditEvent) async throws -> Bool {
        try await pool.write { db in
            guard try db.perform(IntegrationSQL.disableWebhook(integrationID: integrationID, url: url, reason: reason, at: at)) == 1 else {
                return false
            }
            try Self.insert(audit, db)
            return true
        }
    }

    /// Removes enrollment codes, idempotency keys and used proofs past their use; returns how many.
    static func pruneIntegrationRecords(now: Date, _ db: Database) throws -> Int {
        try IntegrationSQL.prune(now: now).reduce(0) { count, statement in count + (try db.perform(statement)) }
    }
}

import CountersignCore
import CountersignSQL
import Foundation
import PostgresNIO

extension PostgresStore: IntegrationStore {
    public func createIntegration(_ integration: Integration, apiKeyHash: String) async throws {
        if try await fetch(IntegrationSQL.insert(integration, apiKeyHash: apiKeyHash)).isEmpty { throw IntegrationError.nameTaken }
    }

    public func integrations() async throws -> [Integration] {
        try await fetch(IntegrationSQL.all).map(Integration.init(row:))
    }

    public func integration(id: String) async throws -> Integration? {
        try await fetch(IntegrationSQL.integration(id: id)).first.map(Integration.init(row:))
    }

    public func integration(apiKeyHash: String) async throws -> Integration? {
        try await fetch(IntegrationSQL.integration(apiKeyHash: apiKeyHash)).first.map(Integration.init(row:))
    }

    public func rotateIntegrationKey(id: String, apiKeyHash: String) async throws -> Bool {
        try await transaction { connection in
            guard try await connection.perform(IntegrationSQL.setKey(id: id, apiKeyHash: apiKeyHash), self.logger) == 1 else { return false }
            try await connection.perform(IntegrationSQL.voidEnrollments(integrationID: id), self.logger)
            return true
        }
    }

    public func rotateWebhookSecret(integrationID: String, secret: String, previousUntil: Date) async throws -> Bool {
        try await fetch(IntegrationSQL.rotateWebhookSecret(integrationID: integrationID, secret: secret, previousUntil: previousUntil)).count == 1
    }

    public func setWebhook(integrationID: String, url: String?, secret: String?, publicOnly: Bool) async throws -> Bool {
        try await fetch(IntegrationSQL.setWebhook(integrationID: integrationID, url: url, secret: secret, publicOnly: publicOnly, .postgres)).count
            == 1
    }

    public func setIntegrationEnabled(id: String, enabled: Bool) async throws -> Bool {
        try await transaction { connection in
            guard try await connection.perform(IntegrationSQL.setEnabled(id: id, enabled: enabled), self.logger) == 1 else { return false }
            if !enabled { try await connection.perform(IntegrationSQL.voidEnrollments(integrationID: id), self.logger) }
            return true
        }
    }

    public func ensureUser(email: String, integrationID: String) async throws -> (user: User, created: Bool) {
        let user = User(id: SecureToken.recordID(), email: User.normalize(email: email), passwordHash: "", createdAt: Date())
        return try await transaction { connection in
            if try await connection.perform(IntegrationSQL.insertOwnedUser(user, integrationID: integrationID), self.logger) == 1 {
                return (user, true)
            }
            guard let existing = try await connection.fetch(AccountSQL.user(email: user.email), self.logger).first else {
                throw AccountError.unknownUser
            }
            return (try User(row: existing), false)
        }
    }

    public func device(id: String) async throws -> Device? {
        try await fetch(IntegrationSQL.device(id: id)).first.map(Device.init(row:))
    }

    public func createEnrollment(
        codeHash: String, userID: String, integrationID: String, apiKeyHash: String?, createdAt: Date, expiresAt: Date
    ) async throws -> Bool {
        try await fetch(
            IntegrationSQL.insertEnrollment(
                codeHash: codeHash, userID: userID, integrationID: integrationID, apiKeyHash: apiKeyHash, createdAt: createdAt, expiresAt: expiresAt)
        ).count == 1
    }

    public func enroll(
        codeHash: String, now: Date, maxDevices: Int, registration: @escaping @Sendable (_ userID: String) -> DeviceRegistration
    ) async throws -> (device: Device, integrationID: String)? {
        try await transaction { connection in
            guard let row = try await connection.fetch(IntegrationSQL.redeemEnrollment(codeHash: codeHash, now: now), self.logger).first else {
                return nil
            }
            // A throw here (too many devices) rolls the whole transaction back: the code stays usable.
            let device = try await Self.registerDevice(registration(try row.get("user_id")), maxDevices: maxDevices, connection, self.logger).device
            return (device, try row.get("integration_id"))
        }
    }

    public func user(email: String, promptableBy integrationID: String) async throws -> (user: User, reached: Bool, enrolled: Bool)? {
        try await fetch(IntegrationSQL.user(email: User.normalize(email: email), promptableBy: integrationID)).first.map {
            (try User(row: $0), try $0.get("reached", as: Bool.self), try $0.get("enrolled", as: Bool.self))
        }
    }

    public func integration(_ integrationID: String, reaches userID: String, all: Bool) async throws -> Bool {
        try await fetch(IntegrationSQL.reaches(integrationID: integrationID, userID: userID, all: all)).count == 1
    }

    public func setPromptsAllUsers(integrationID: String, on: Bool) async throws -> Bool {
        try await fetch(IntegrationSQL.setPromptsAllUsers(id: integrationID, on: on)).count == 1
    }

    public func user(email: String, ownedBy integrationID: String) async throws -> User? {
        try await fetch(IntegrationSQL.user(email: User.normalize(email: email), ownedBy: integrationID)).first.map(User.init(row:))
    }

    public func grantUser(integrationID: String, userID: String, at: Date) async throws -> Bool {
        try await fetch(IntegrationSQL.grant(integrationID: integrationID, userID: userID, at: at)).count == 1
    }

    public func revokeGrant(integrationID: String, userID: String) async throws -> Bool {
        try await transaction { connection in
            guard try await connection.perform(IntegrationSQL.revokeGrant(integrationID: integrationID, userID: userID), self.logger) == 1 else {
                return false
            }
            try await connection.perform(IntegrationSQL.voidEnrollments(integrationID: integrationID, userID: userID), self.logger)
            return true
        }
    }

    public func idempotencyRecord(integrationID: String, key: String, since: Date) async throws -> IdempotencyRecord? {
        try await fetch(IntegrationSQL.idempotencyRecord(integrationID: integrationID, key: key, since: since)).first.map(
            IdempotencyRecord.init(row:))
    }

    public func webhookDeliveries(integrationID: String?, failedOnly: Bool, limit: Int) async throws -> [OutboxEntry] {
        try await fetch(IntegrationSQL.webhookDeliveries(integrationID: integrationID, failedOnly: failedOnly, limit: limit, .postgres))
            .compactMap(OutboxEntry.init(row:))
    }

    public func redeliverWebhook(eventID: String, integrationID: String?, finishedOnly: Bool, now: Date) async throws -> String? {
        try await fetch(
            IntegrationSQL.redeliverWebhook(eventID: eventID, integrationID: integrationID, finishedOnly: finishedOnly, now: now, .postgres)
        ).first?.get("reference")
    }

    public func queueWebhookPing(_ item: OutboxItem, integrationID: String) async throws -> Bool {
        try await fetch(IntegrationSQL.queuePing(item, integrationID: integrationID)).count == 1
    }

    public func disableWebhook(integrationID: String, url: String, reason: String, at: Date, audit: AuditEvent) async throws -> Bool {
        try await transaction { connection in
            let statement = IntegrationSQL.disableWebhook(integrationID: integrationID, url: url, reason: reason, at: at)
            guard try await connection.perform(statement, self.logger) == 1 else { return false }
            try await Self.insert(audit, connection, self.logger)
            return true
        }
    }

    /// Removes enrollment codes, idempotency keys and used proofs past their use; returns how many.
    static func pruneIntegrationRecords(now: Date, _ connection: PostgresConnection, _ logger: Logger) async throws -> Int {
        var removed = 0
        for statement in IntegrationSQL.prune(now: now) { removed += try await connection.perform(statement, logger) }
        return removed
    }
}

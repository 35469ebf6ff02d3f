import CountersignCore
import CountersignSQL
import Foundation
import GRDB

extension SQLiteStore: RemovalStore {
    public func eraseUser(
        userID: String, ownedBy integrationID: String?, pseudonym: String, at now: Date, audit: AuditEvent
    ) async throws -> ErasedUser? {
        try await pool.write { db in
            guard let row = try db.fetchFirst(AccountSQL.user(id: userID)) else { return nil }
            let user = try User(row: row)
            if let integrationID, user.ownerIntegrationID != integrationID { return nil }
            let email = user.email
            var cancelled: [CancelledRequest] = []
            for row in try db.fetch(RemovalSQL.liveRequests(userID: userID)) {
                guard let cancellation = RemovalSQL.cancellation(of: try ApprovalRequest(row: row), .userErased, at: now, webhook: true),
                    try db.perform(cancellation.update) == 1
                else { continue }
                if let event = cancellation.event { try db.perform(event) }
                try Self.insert(cancellation.audit, db)
                cancelled.append(cancellation.cancelled)
            }
            let devices: Int = try db.fetchFirst(RemovalSQL.deviceCount(userID: userID))?.get("n") ?? 0
            let events = try db.perform(RemovalSQL.pseudonymize(userID: userID, email: email, pseudonym: pseudonym))
            var removed = 0
            for statement in RemovalSQL.erase(userID: userID, email: email) { removed = try db.perform(statement) }
            guard removed == 1 else { throw AccountError.unknownUser }
            try Self.insert(audit, db)
            return ErasedUser(userID: userID, devices: devices, cancelled: cancelled, auditEvents: events)
        }
    }

    public func deleteIntegration(id: String, at now: Date, audit: AuditEvent) async throws -> DeletedIntegration? {
        try await pool.write { db in
            guard try db.fetchFirst(IntegrationSQL.integration(id: id)) != nil else { return nil }
            var cancelled: [CancelledRequest] = []
            for row in try db.fetch(RemovalSQL.liveRequests(integrationID: id)) {
                guard let cancellation = RemovalSQL.cancellation(of: try ApprovalRequest(row: row), .integrationDeleted, at: now, webhook: false),
                    try db.perform(cancellation.update) == 1
                else { continue }
                try Self.insert(cancellation.audit, db)
                cancelled.append(cancellation.cancelled)
            }
            let ending = RemovalSQL.endIntegration(id: id, at: now)
            let grants = try db.perform(ending.grants)
            let users = try db.perform(ending.users)
            let events = try db.perform(ending.events)
            for statement in ending.rest { try db.perform(statement) }
            try db.perform(RemovalSQL.deleteIntegration(id: id))
            try Self.insert(audit, db)
            return DeletedIntegration(cancelled: cancelled, usersReleased: users, grantsEnded: grants, eventsDropped: events)
        }
    }
}

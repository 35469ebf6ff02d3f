import CountersignCore
import CountersignSQL
import Foundation
import PostgresNIO

extension PostgresStore: RemovalStore {
    public func eraseUser(
        userID: String, ownedBy integrationID: String?, pseudonym: String, at now: Date, audit: AuditEvent
    ) async throws -> ErasedUser? {
        try await transaction { connection in
            // The user's row first, locked: a device enrolling or a request created meanwhile waits for the erasure.
            guard let row = try await connection.fetch(AccountSQL.user(id: userID).appending(" FOR UPDATE"), self.logger).first else { return nil }
            let user = try User(row: row)
            if let integrationID, user.ownerIntegrationID != integrationID { return nil }
            let email = user.email
            var cancelled: [CancelledRequest] = []
            for row in try await connection.fetch(RemovalSQL.liveRequests(userID: userID).appending(" FOR UPDATE"), self.logger) {
                guard let cancellation = RemovalSQL.cancellation(of: try ApprovalRequest(row: row), .userErased, at: now, webhook: true),
                    try await connection.perform(cancellation.update, self.logger) == 1
                else { continue }
                if let event = cancellation.event { try await connection.perform(event, self.logger) }
                try await Self.insert(cancellation.audit, connection, self.logger)
                // Every node's long polls of it wake when this commits.
                try await Self.notify(cancellation.cancelled.id, connection, self.logger)
                cancelled.append(cancellation.cancelled)
            }
            let devices: Int = try await connection.fetch(RemovalSQL.deviceCount(userID: userID), self.logger).first?.get("n") ?? 0
            let events = try await connection.perform(RemovalSQL.pseudonymize(userID: userID, email: email, pseudonym: pseudonym), self.logger)
            var removed = 0
            for statement in RemovalSQL.erase(userID: userID, email: email) { removed = try await connection.perform(statement, self.logger) }
            guard removed == 1 else { throw AccountError.unknownUser }
            try await Self.insert(audit, connection, self.logger)
            return ErasedUser(userID: userID, devices: devices, cancelled: cancelled, auditEvents: events)
        }
    }

    public func deleteIntegration(id: String, at now: Date, audit: AuditEvent) async throws -> DeletedIntegration? {
        try await transaction { connection in
            guard try await connection.fetch(IntegrationSQL.integration(id: id).appending(" FOR UPDATE"), self.logger).first != nil else {
                return nil
            }
            var cancelled: [CancelledRequest] = []
            for row in try await connection.fetch(RemovalSQL.liveRequests(integrationID: id).appending(" FOR UPDATE"), self.logger) {
                guard
                    let cancellation = RemovalSQL.cancellation(of: try ApprovalRequest(row: row), .integrationDeleted, at: now, webhook: false),
                    try await connection.perform(cancellation.update, self.logger) == 1
                else { continue }
                try await Self.insert(cancellation.audit, connection, self.logger)
                try await Self.notify(cancellation.cancelled.id, connection, self.logger)
                cancelled.append(cancellation.cancelled)
            }
            let ending = RemovalSQL.endIntegration(id: id, at: now)
            let grants = try await connection.perform(ending.grants, self.logger)
            let users = try await connection.perform(ending.users, self.logger)
            let events = try await connection.perform(ending.events, self.logger)
            for statement in ending.rest { try await connection.perform(statement, self.logger) }
            try await connection.perform(RemovalSQL.deleteIntegration(id: id), self.logger)
            try await Self.insert(audit, connection, self.logger)
            return DeletedIntegration(cancelled: cancelled, usersReleased: users, grantsEnded: grants, eventsDropped: events)
        }
    }
}

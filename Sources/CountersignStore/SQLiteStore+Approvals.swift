import CountersignCore
import Foundation
import GRDB

extension SQLiteStore: ApprovalStore {
    public func insert(_ request: ApprovalRequest) async throws -> [ApprovalRequest] {
        try await pool.write { db in
            let now = request.createdAt.storedValue
            let superseded = try Row.fetchAll(
                db,
                sql: """
                    SELECT * FROM approval_requests
                    WHERE subject = ? AND action = ? AND state = 'pending' AND expires_at > ?
                    """,
                arguments: [request.subject, request.action.rawValue, now]
            ).map(ApprovalRequest.init(row:))
            for old in superseded {
                // The same change as ApprovalStateMachine.supersede(at:).
                try db.execute(
                    sql: """
                        UPDATE approval_requests SET state = 'cancelled', updated_at = ?, new_password_hash = NULL, version = version + 1
                        WHERE id = ? AND state = 'pending'
                        """,
                    arguments: [now, old.id]
                )
            }
            try db.execute(
                sql: """
                    INSERT INTO approval_requests (
                        id, user_id, subject, action, state, created_at, expires_at, completion_window,
                        complete_by, updated_at, number_code_salt, number_code_hash, new_password_hash,
                        requester_ip, requester_user_agent, responding_device_id)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """,
                arguments: [
                    request.id, request.userID, request.subject, request.action.rawValue, request.state.rawValue,
                    now, request.expiresAt.storedValue, request.completionWindow,
                    request.completeBy?.storedValue, request.updatedAt.storedValue,
                    request.numberCode?.salt, request.numberCode?.hash, request.newPasswordHash,
                    request.requester.ip, request.requester.userAgent, request.respondingDeviceID,
                ]
            )
            return superseded
        }
    }

    public func request(id: String) async throws -> ApprovalRequest? {
        try await pool.read { db in
            try Row.fetchOne(db, sql: "SELECT * FROM approval_requests WHERE id = ?", arguments: [id])
                .map(ApprovalRequest.init(row:))
        }
    }

    public func liveRequests() async throws -> [ApprovalRequest] {
        try await pool.read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM approval_requests WHERE state IN ('pending', 'approved')")
                .map(ApprovalRequest.init(row:))
        }
    }

    public func apply(_ transition: Transition, to request: ApprovalRequest, writeTime: @escaping @Sendable () -> Date) async throws -> Bool {
        let deadlineColumn: String
        switch transition.from {
        case .pending: deadlineColumn = "expires_at"
        case .approved: deadlineColumn = "complete_by"
        default: return false  // terminal states never change
        }
        // A time-out applies only once the deadline has passed; anything else only before it.
        let deadlineGuard = transition.cause == .timedOut ? "\(deadlineColumn) <= ?" : "\(deadlineColumn) > ?"
        return try await pool.write { db in
            // Completing needs the held hash, which the update below clears: read it first.
            let held =
                transition.to == .completed
                ? try Row.fetchOne(
                    db, sql: "SELECT user_id, new_password_hash FROM approval_requests WHERE id = ?", arguments: [request.id])
                : nil
            try db.execute(
                sql: """
                    UPDATE approval_requests
                    SET state = ?, updated_at = ?, complete_by = ?, new_password_hash = ?, responding_device_id = ?,
                        version = version + 1
                    WHERE id = ? AND state = ? AND \(deadlineGuard)
                    """,
                arguments: [
                    transition.to.rawValue, transition.at.storedValue, request.completeBy?.storedValue,
                    request.newPasswordHash, request.respondingDeviceID,
                    request.id, transition.from.rawValue, writeTime().storedValue,
                ]
            )
            guard db.changesCount == 1 else { return false }
            if transition.to == .completed {
                // The held hash becomes the password in the same transaction as the completion.
                guard let userID: String = held?["user_id"], let hash: String = held?["new_password_hash"] else {
                    throw DatabaseError(message: "approved request \(request.logReference) holds no password hash")
                }
                try db.execute(sql: "UPDATE users SET password_hash = ? WHERE id = ?", arguments: [hash, userID])
            }
            return true
        }
    }
}

extension ApprovalRequest {
    init(row: Row) throws {
        let salt: String? = row["number_code_salt"]
        let hash: String? = row["number_code_hash"]
        guard let state = ApprovalState(rawValue: row["state"]),
            let action = ApprovalAction(rawValue: row["action"])
        else {
            throw DatabaseError(message: "approval request row with unknown state or action")
        }
        self.init(
            id: row["id"],
            userID: row["user_id"],
            subject: row["subject"],
            action: action,
            state: state,
            createdAt: Date(stored: row["created_at"]),
            expiresAt: Date(stored: row["expires_at"]),
            completionWindow: row["completion_window"],
            completeBy: (row["complete_by"] as Double?).map(Date.init(stored:)),
            updatedAt: Date(stored: row["updated_at"]),
            numberCode: salt.flatMap { salt in hash.map { NumberCode.Stored(salt: salt, hash: $0) } },
            newPasswordHash: row["new_password_hash"],
            requester: RequesterInfo(ip: row["requester_ip"], userAgent: row["requester_user_agent"]),
            respondingDeviceID: row["responding_device_id"],
            version: row["version"]
        )
    }
}

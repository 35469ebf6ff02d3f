import Foundation

/// One column value of a stored row, as `countersign migrate` carries it
/// from one backend to the other.
public enum StoredValue: Sendable, Equatable {
    case null
    case integer(Int64)
    case real(Double)
    case text(String)
    case blob(Data)
}

/// The tables `countersign migrate` copies, in an order that satisfies their
/// references, each with the rows that are still of use (finished requests,
/// used codes and sent mail stay behind).
public enum MigratedTable: String, Sendable, CaseIterable {
    case users
    case devices
    case integrations
    case integrationGrants = "integration_grants"
    case bypassCodes = "bypass_codes"
    case usedProofs = "used_proofs"
    case approvalRequests = "approval_requests"
    case emailResets = "email_resets"
    case enrollments
    case idempotencyKeys = "idempotency_keys"
    case outbox
    case auditEvents = "audit_events"
}

import CountersignCore

/// The store tests' short forms of the broker's two writes.
extension ApprovalStore {
    /// Applies a transition written at the moment it was decided.
    public func apply(_ transition: Transition, to request: ApprovalRequest) async throws -> Bool {
        try await apply(transition, to: request, event: nil, audit: nil, writeTime: { transition.at })
    }

    /// Inserts a phone-reset request (no idempotency key, no webhook).
    public func insert(_ request: ApprovalRequest) async throws -> [Supersession] {
        try await insert(request, idempotency: nil, supersededEvent: { _ in nil })
    }
}

import Foundation

/// One security event. Never holds a secret: requests are named by their
/// ``ApprovalRequest/logReference``, push tokens by their last characters.
public struct AuditEvent: Sendable, Equatable {
    public var at: Date
    public var kind: AuditKind
    public var userID: String?
    public var email: String?
    public var deviceID: String?
    public var requestRef: String?
    public var ip: String?
    public var userAgent: String?
    public var detail: String?
    /// A device's signed answer (compact JWS), kept with the answer it proves.
    public var proof: String?
    /// The key that signed `proof`, as a JWK: the device's key may change later.
    public var proofKey: String?

    public init(
        at: Date = Date(),
        kind: AuditKind,
        userID: String? = nil,
        email: String? = nil,
        deviceID: String? = nil,
        requestRef: String? = nil,
        context: AuditContext = .system,
        detail: String? = nil,
        proof: String? = nil,
        proofKey: String? = nil
    ) {
        self.at = at
        self.kind = kind
        self.userID = userID
        self.email = email
        self.deviceID = deviceID ?? context.deviceID
        self.requestRef = requestRef
        self.ip = context.ip
        self.userAgent = context.userAgent
        self.detail = detail
        self.proof = proof ?? context.proof
        self.proofKey = proofKey ?? context.proofKey
    }
}

/// Who did it and from where, as far as the daemon knows.
public struct AuditContext: Sendable, Equatable {
    public var ip: String?
    public var userAgent: String?
    public var deviceID: String?
    /// The device's signed answer (JWS) and the key (JWK) that signed it, when
    /// it signed: the events of that answer keep them, as proof of which key approved.
    public var proof: String?
    public var proofKey: String?

    public init(ip: String? = nil, userAgent: String? = nil, deviceID: String? = nil, proof: String? = nil, proofKey: String? = nil) {
        self.ip = ip
        self.userAgent = userAgent
        self.deviceID = deviceID
        self.proof = proof
        self.proofKey = proofKey
    }

    public static let system = AuditContext()
}

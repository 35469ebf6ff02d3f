/// Where push settings come from and what they resolve to.
public struct PushSettings: Sendable, Equatable {
    /// The service-account key file; `nil`: push is off.
    public var serviceAccountFile: String?
    public var endpoint = "https://fcm.googleapis.com"
    /// An extra trusted CA (PEM) for the token and send endpoints.
    public var caFile: String?

    public init(serviceAccountFile: String? = nil, endpoint: String = "https://fcm.googleapis.com", caFile: String? = nil) {
        self.serviceAccountFile = serviceAccountFile
        self.endpoint = endpoint
        self.caFile = caFile
    }

    /// The systemd credential name (`LoadCredential=fcm-service-account.json:…`).
    public static let credentialName = "fcm-service-account.json"
}

import CountersignCore

/// Where push settings come from and what they resolve to: FCM, APNs and
/// Web Push, each off until configured.
public struct PushConfiguration: Sendable, Equatable {
    /// The service-account key file; `nil`: FCM is off.
    public var serviceAccountFile: String?
    public var endpoint = "https://fcm.googleapis.com"
    /// An extra trusted CA (PEM) for the token and send endpoints.
    public var caFile: String?
    /// APNs with a token-based key; `nil`: off.
    public var apns: APNsConfiguration?
    /// Web Push (UnifiedPush); `nil`: off.
    public var webPush: WebPushConfiguration?
    /// Which Web Push endpoints devices may register and the daemon posts to.
    public var endpoints = PushEndpointPolicy()
    /// Sends in flight to one Web Push endpoint host within the Web Push lane (`--push-per-host-in-flight`).
    public var perHostInFlight = 4
    /// Whether FCM and APNs pushes are sealed to the devices' sealing keys (`--sealed-push`).
    public var sealedPush = SealedPushPolicy.optional

    public init(serviceAccountFile: String? = nil, endpoint: String = "https://fcm.googleapis.com", caFile: String? = nil) {
        self.serviceAccountFile = serviceAccountFile
        self.endpoint = endpoint
        self.caFile = caFile
    }

    /// The systemd credential name (`LoadCredential=fcm-service-account.json:…`).
    public static let credentialName = "fcm-service-account.json"
}

/// APNs: the `.p8` key, its id and the team's; `url` and `caFile` for tests.
public struct APNsConfiguration: Sendable, Equatable {
    public var keyFile: String
    public var keyID: String
    public var teamID: String
    /// Both environments at this address instead of Apple's hosts.
    public var url: String?
    public var caFile: String?

    public init(keyFile: String, keyID: String, teamID: String, url: String? = nil, caFile: String? = nil) {
        self.keyFile = keyFile
        self.keyID = keyID
        self.teamID = teamID
        self.url = url
        self.caFile = caFile
    }

    /// The systemd credential name (`LoadCredential=apns-key:…`).
    public static let credentialName = "apns-key"
}

/// Web Push: the VAPID key file (created on first start when missing) and the
/// `sub` the push services may write to.
public struct WebPushConfiguration: Sendable, Equatable {
    public var vapidKeyFile: String
    /// `mailto:…` or `https://…`.
    public var subject: String
    /// Whether a missing key file may be created (not for a cluster: every node needs the same key).
    public var createKey: Bool

    public init(vapidKeyFile: String, subject: String, createKey: Bool = true) {
        self.vapidKeyFile = vapidKeyFile
        self.subject = subject
        self.createKey = createKey
    }
}

import ArgumentParser
import CountersignRuntime

/// The push settings every command finds the same way: flag, environment,
/// config file, then `$CREDENTIALS_DIRECTORY`. Each provider is off until configured.
struct PushOptions: ParsableArguments {
    typealias Setting = ConfigurationLoader

    @Option(
        name: .customLong(Setting.fcmServiceAccount.longName),
        help:
            "FCM service-account key file (also COUNTERSIGN_FCM_SERVICE_ACCOUNT, config fcm.serviceAccountFile, $CREDENTIALS_DIRECTORY/fcm-service-account.json)."
    )
    var fcmServiceAccount: String?
    @Option(name: .customLong(Setting.fcmEndpoint.longName), help: "FCM base URL (default https://fcm.googleapis.com).")
    var fcmEndpoint: String?
    @Option(name: .customLong(Setting.fcmCAFile.longName), help: "An extra trusted CA (PEM) for the FCM token and send endpoints.")
    var fcmCAFile: String?
    @Option(
        name: .customLong(Setting.apnsKeyFile.longName),
        help: "APNs token-based key (.p8): turns APNs on (also COUNTERSIGN_APNS_KEY_FILE, config apns.keyFile, $CREDENTIALS_DIRECTORY/apns-key).")
    var apnsKeyFile: String?
    @Option(name: .customLong(Setting.apnsKeyID.longName), help: "The APNs key's id (10 characters; also COUNTERSIGN_APNS_KEY_ID).")
    var apnsKeyID: String?
    @Option(name: .customLong(Setting.apnsTeamID.longName), help: "The Apple developer team id (10 characters; also COUNTERSIGN_APNS_TEAM_ID).")
    var apnsTeamID: String?
    @Option(
        name: .customLong(Setting.apnsURL.longName),
        help: "Send to this APNs address for both environments (default api.push.apple.com and api.sandbox.push.apple.com).")
    var apnsURL: String?
    @Option(name: .customLong(Setting.apnsCAFile.longName), help: "An extra trusted CA (PEM) for the APNs address.")
    var apnsCAFile: String?
    @Option(
        name: .customLong(Setting.vapidSubject.longName),
        help: "mailto: or https:// contact for Web Push services: turns Web Push (UnifiedPush) on (also COUNTERSIGN_VAPID_SUBJECT).")
    var vapidSubject: String?
    @Option(
        name: .customLong(Setting.vapidKeyFile.longName),
        help: "The VAPID key (EC P-256, PEM); default countersign.vapid.pem beside the database, created on first start.")
    var vapidKeyFile: String?
    @Flag(
        name: .customLong(Setting.pushAllowPrivateEndpoints.longName),
        help:
            "Accept Web Push endpoints on private, loopback and link-local addresses, and http:// (tests, closed networks; also COUNTERSIGN_PUSH_ALLOW_PRIVATE_ENDPOINTS=on)."
    )
    var pushAllowPrivateEndpoints = false

    var flags: [String: String] {
        [
            Setting.fcmServiceAccount.flag: fcmServiceAccount, Setting.fcmEndpoint.flag: fcmEndpoint, Setting.fcmCAFile.flag: fcmCAFile,
            Setting.apnsKeyFile.flag: apnsKeyFile, Setting.apnsKeyID.flag: apnsKeyID, Setting.apnsTeamID.flag: apnsTeamID,
            Setting.apnsURL.flag: apnsURL, Setting.apnsCAFile.flag: apnsCAFile, Setting.vapidSubject.flag: vapidSubject,
            Setting.vapidKeyFile.flag: vapidKeyFile, Setting.pushAllowPrivateEndpoints.flag: pushAllowPrivateEndpoints ? "on" : nil,
        ].compactMapValues { $0 }
    }
}

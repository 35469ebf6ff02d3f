import ArgumentParser
import CountersignRuntime

/// The push settings every command finds the same way: flag, environment,
/// config file, then `$CREDENTIALS_DIRECTORY`. Each provider is off until configured.
struct PushOptions: ParsableArguments {
    typealias Setting = ConfigurationLoader

    @Option(
        name: Setting.fcmServiceAccount.name,
        help: Setting.fcmServiceAccount.help(
            "The FCM service-account key file: turns FCM on.", default: "$CREDENTIALS_DIRECTORY/fcm-service-account.json", value: "file"))
    var fcmServiceAccount: String?
    @Option(name: Setting.fcmEndpoint.name, help: Setting.fcmEndpoint.help("FCM's base URL.", default: "https://fcm.googleapis.com", value: "url"))
    var fcmEndpoint: String?
    @Option(
        name: Setting.fcmCAFile.name, help: Setting.fcmCAFile.help("An extra trusted CA (PEM) for FCM's token and send addresses.", value: "file"))
    var fcmCAFile: String?
    @Option(
        name: Setting.apnsKeyFile.name,
        help: Setting.apnsKeyFile.help("The APNs token-based key (.p8): turns APNs on.", default: "$CREDENTIALS_DIRECTORY/apns-key", value: "file"))
    var apnsKeyFile: String?
    @Option(name: Setting.apnsKeyID.name, help: Setting.apnsKeyID.help("The APNs key's id (10 characters).", value: "id"))
    var apnsKeyID: String?
    @Option(name: Setting.apnsTeamID.name, help: Setting.apnsTeamID.help("The Apple developer team id (10 characters).", value: "id"))
    var apnsTeamID: String?
    @Option(
        name: Setting.apnsURL.name,
        help: Setting.apnsURL.help(
            "Send to this APNs address for both environments.", default: "api.push.apple.com and api.sandbox.push.apple.com", value: "url"))
    var apnsURL: String?
    @Option(name: Setting.apnsCAFile.name, help: Setting.apnsCAFile.help("An extra trusted CA (PEM) for the APNs address.", value: "file"))
    var apnsCAFile: String?
    @Option(
        name: Setting.vapidSubject.name,
        help: Setting.vapidSubject.help("A mailto: or https:// contact for Web Push services: turns Web Push (UnifiedPush) on.", value: "url"))
    var vapidSubject: String?
    @Option(
        name: Setting.vapidKeyFile.name,
        help: Setting.vapidKeyFile.help(
            "The VAPID key (EC P-256, PEM), created on first start.",
            default: "$CREDENTIALS_DIRECTORY/vapid-key, else countersign.vapid.pem beside the database",
            value: "file"))
    var vapidKeyFile: String?
    @Flag(
        name: Setting.pushAllowPrivateEndpoints.name,
        help: Setting.pushAllowPrivateEndpoints.help(
            "Accept Web Push endpoints on private, loopback and link-local addresses, and http:// (tests, closed networks); the variable and key take \"on\"."
        ))
    var pushAllowPrivateEndpoints = false
    @Option(
        name: Setting.pushPerHostInFlight.name,
        help: Setting.pushPerHostInFlight.help(
            "Sends in flight to one Web Push endpoint host: a host that never answers holds no more of the Web Push lane's 64.",
            default: "4", value: "count"))
    var pushPerHostInFlight: String?
    @Option(
        name: Setting.sealedPush.name,
        help: Setting.sealedPush.help(
            "FCM and APNs pushes sealed end to end (HPKE) to each device's sealing key: optional seals them for devices with a key; required also sends devices without one no user data at all.",
            default: "optional", value: "off|optional|required"))
    var sealedPush: String?

    var flags: [String: String] {
        [
            Setting.fcmServiceAccount.flag: fcmServiceAccount, Setting.fcmEndpoint.flag: fcmEndpoint, Setting.fcmCAFile.flag: fcmCAFile,
            Setting.apnsKeyFile.flag: apnsKeyFile, Setting.apnsKeyID.flag: apnsKeyID, Setting.apnsTeamID.flag: apnsTeamID,
            Setting.apnsURL.flag: apnsURL, Setting.apnsCAFile.flag: apnsCAFile, Setting.vapidSubject.flag: vapidSubject,
            Setting.vapidKeyFile.flag: vapidKeyFile, Setting.pushAllowPrivateEndpoints.flag: pushAllowPrivateEndpoints ? "on" : nil,
            Setting.pushPerHostInFlight.flag: pushPerHostInFlight, Setting.sealedPush.flag: sealedPush,
        ].compactMapValues { $0 }
    }
}

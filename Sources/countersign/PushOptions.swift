import ArgumentParser
import CountersignRuntime

/// The FCM settings every command finds the same way: flag, environment,
/// config file, then `$CREDENTIALS_DIRECTORY`.
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

    var flags: [String: String] {
        [
            Setting.fcmServiceAccount.flag: fcmServiceAccount, Setting.fcmEndpoint.flag: fcmEndpoint, Setting.fcmCAFile.flag: fcmCAFile,
        ].compactMapValues { $0 }
    }
}

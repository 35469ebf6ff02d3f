import ArgumentParser
import CountersignRuntime
import Foundation

// The settings' options, in the groups `serve --help` shows. Each is one line: the setting it is (its name, help,
// value name and default come from its declaration in `Settings`) and a property named as the setting, through which
// `givenSettings` finds it. Commands that need a group's settings take the group (`push check`: `PushOptions`).

/// Every setting, in its group: `serve`'s options, and `config check`'s.
struct ServeSettings: ParsableArguments {
    @OptionGroup(title: SettingInfo.Group.listening.rawValue) var listening: ListenOptions
    @OptionGroup(title: SettingInfo.Group.storage.rawValue) var storage: StorageOptions
    @OptionGroup(title: SettingInfo.Group.approvals.rawValue) var approvals: ApprovalOptions
    @OptionGroup(title: SettingInfo.Group.limits.rawValue) var limits: LimitOptions
    @OptionGroup(title: SettingInfo.Group.logs.rawValue) var logs: LogOptions
    @OptionGroup(title: SettingInfo.Group.push.rawValue) var push: PushOptions
    @OptionGroup(title: SettingInfo.Group.mail.rawValue) var mail: MailOptions
    @OptionGroup(title: SettingInfo.Group.emailReset.rawValue) var emailReset: EmailResetOptions

    /// Every setting given on the command line.
    var given: GivenSettings { GivenSettings(listening, storage, approvals, limits, logs, push, mail, emailReset) }
}

struct ListenOptions: ParsableArguments {
    @Option(\.listen) var listen: String?
    @Option(\.metricsListen) var metricsListen: String?
    @Option(\.trustedProxies) var trustedProxies: [String] = []
    @Option(\.connectionsPerAddress) var connectionsPerAddress: String?
    @Option(\.idleTimeout) var idleTimeout: String?
    @Option(\.requestTimeout) var requestTimeout: String?
    @Option(\.headerTimeout) var headerTimeout: String?
    @Option(\.longPollsPerAddress) var longPollsPerAddress: String?
    @Option(\.longPollsMax) var longPollsMax: String?
}

struct StorageOptions: ParsableArguments {
    @Option(\.database) var database: String?
    @Option(\.databasePasswordFile) var databasePasswordFile: String?
    @Option(\.databaseConnectionWait) var databaseConnectionWait: String?
    @Option(\.databaseQueryLimit) var databaseQueryLimit: String?
    @Option(\.nodeID) var nodeID: String?
    @Option(\.secretKeyFile) var secretKeyFile: String?
}

struct ApprovalOptions: ParsableArguments {
    @Option(\.requestTTL) var requestTTL: String?
    @Option(\.completionWindow) var completionWindow: String?
    @Option(\.numberMatching) var numberMatching: String?
    @Option(\.deviceKeys) var deviceKeys: String?
    @Option(\.offlineCodes) var offlineCodes: String?
    @Option(\.appLinkScheme) var appLinkScheme: String?
    @Option(\.otpIssuer) var otpIssuer: String?
    @Option(\.fraudSilence) var fraudSilence: String?
    @Option(\.maxDevicesPerUser) var maxDevicesPerUser: String?
}

struct LimitOptions: ParsableArguments {
    @Option(\.bcryptCost) var bcryptCost: String?
    @Option(\.bcryptQueue) var bcryptQueue: String?
    @Option(\.rateLimits) var rateLimits: [String] = []
}

struct LogOptions: ParsableArguments {
    @Option(\.logLevel) var logLevel: String?
    @Option(\.logFormat) var logFormat: String?
    @Option(\.auditRetentionDays) var auditRetentionDays: String?
}

/// The push settings every command finds the same way: flag, environment, config file, then `$CREDENTIALS_DIRECTORY`.
/// Each provider is off until configured.
struct PushOptions: ParsableArguments {
    @Option(\.fcmServiceAccount) var fcmServiceAccount: String?
    @Option(\.fcmEndpoint) var fcmEndpoint: String?
    @Option(\.fcmCAFile) var fcmCAFile: String?
    @Option(\.apnsKeyFile) var apnsKeyFile: String?
    @Option(\.apnsKeyID) var apnsKeyID: String?
    @Option(\.apnsTeamID) var apnsTeamID: String?
    @Option(\.apnsURL) var apnsURL: String?
    @Option(\.apnsCAFile) var apnsCAFile: String?
    @Option(\.vapidSubject) var vapidSubject: String?
    @Option(\.vapidKeyFile) var vapidKeyFile: String?
    @Flag(\.pushAllowPrivateEndpoints) var pushAllowPrivateEndpoints = false
    @Option(\.pushPerHostInFlight) var pushPerHostInFlight: String?
    @Option(\.sealedPush) var sealedPush: String?
}

/// The mail settings `serve`, `mail test` and `demo --email` find the same way: flag, environment, config file (the
/// SMTP password also from `$CREDENTIALS_DIRECTORY/smtp-password`).
struct MailOptions: ParsableArguments {
    @Option(\.smtpURL) var smtpURL: String?
    @Option(\.smtpUser) var smtpUser: String?
    @Option(\.smtpPasswordFile) var smtpPasswordFile: String?
    @Option(\.smtpFrom) var smtpFrom: String?
    @Option(\.smtpTLS) var smtpTLS: String?
    @Option(\.smtpCAFile) var smtpCAFile: String?
}

struct EmailResetOptions: ParsableArguments {
    @Option(\.publicURL) var publicURL: String?
    @Option(\.resetLinkTemplate) var resetLinkTemplate: String?
    @Option(\.emailCodeTTL) var emailCodeTTL: String?
    @Option(\.mailTemplates) var mailTemplates: String?
}

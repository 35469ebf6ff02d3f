import ArgumentParser
import AsyncHTTPClient
import CountersignCore
import CountersignPush
import CountersignRuntime
import Crypto
import Foundation
import Logging
import NIOCore

/// `countersign push check`: each configured provider's credentials, as `serve` would load them.
struct PushCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "push", abstract: "Push provider tools (FCM, APNs, Web Push).", subcommands: [Check.self])

    struct Check: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Check each configured provider's credentials: FCM's access token, APNs' provider token, the VAPID key.",
            discussion: """
                FCM: loads the service account and fetches an access token; with --token, FCM validates a message to \
                that device (validate_only: nothing is delivered). APNs: signs a provider token and, with --apns-topic, \
                sends it with a device token that cannot exist: APNs answers BadDeviceToken only when it accepts the \
                credentials (nothing is delivered). Web Push: loads the VAPID key (never creates one) and prints its public key.
                """)
        @Option(help: configHelp, completion: .file()) var config: String?
        @OptionGroup var push: PushOptions
        @Option(help: ArgumentHelp("Check only this provider.", valueName: "fcm|apns|webpush")) var provider: PushProvider?
        @Option(help: ArgumentHelp("A device's FCM registration token: send it a validate_only message (nothing is delivered).", valueName: "token"))
        var token: String?
        @Option(help: ArgumentHelp("The app's bundle id, for the APNs check (APNs checks the key against it).", valueName: "bundle-id"))
        var apnsTopic: String?
        @OptionGroup var wait: CheckTimeout

        func run() async throws {
            try await PushCheck(push: push, config: config, token: token, apnsTopic: apnsTopic, timeout: wait.timeout).run(only: provider)
        }
    }
}

/// `countersign fcm check`: the older name of `push check --provider fcm`.
struct FCMCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "fcm", abstract: "Firebase Cloud Messaging tools (see push).", subcommands: [Check.self])

    struct Check: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Same as push check --provider fcm: load the service account, fetch an access token and, with --token, validate a message."
        )
        @Option(help: configHelp, completion: .file()) var config: String?
        @OptionGroup var push: PushOptions
        @Option(help: ArgumentHelp("A device's FCM registration token: send it a validate_only message (nothing is delivered).", valueName: "token"))
        var token: String?
        @OptionGroup var wait: CheckTimeout

        func run() async throws {
            try await PushCheck(push: push, config: config, token: token, apnsTopic: nil, timeout: wait.timeout).run(only: .fcm)
        }
    }
}

extension PushProvider: ExpressibleByArgument {}

/// `--timeout` of the push checks.
struct CheckTimeout: ParsableArguments {
    @Option(help: ArgumentHelp("Seconds to wait for each of the provider's answers.", valueName: "seconds"))
    var timeout: Int = 15

    func validate() throws {
        guard (1...600).contains(timeout) else { throw ValidationError("--timeout must be 1 to 600 seconds") }
    }
}

struct PushCheck {
    let push: PushOptions
    let config: String?
    let token: String?
    let apnsTopic: String?
    /// Seconds each connection, token exchange and send may take.
    let timeout: Int
    private var limit: TimeAmount { .seconds(Int64(timeout)) }

    /// A client whose connections and answers wait `timeout`.
    func makeClient(caFile: String?) throws -> HTTPClient {
        try PushSetup.makeClient(caFile: caFile, connectTimeout: limit, readTimeout: limit)
    }

    func run(only: PushProvider?) async throws {
        var pushConfiguration = try await loadOrExit {
            try GivenSettings(push).loader(config: config)
                .pushConfiguration()
        }
        // A check never creates the VAPID key: one made by another user than the daemon's would lock it out.
        pushConfiguration.webPush?.createKey = false
        let configured: [PushProvider] =
            [
                pushConfiguration.serviceAccountFile.map { _ in .fcm }, pushConfiguration.apns.map { _ in .apns },
                pushConfiguration.webPush.map { _ in .webPush },
            ]
            .compactMap { $0 }
        let chosen = only.map { [$0] } ?? configured
        guard !chosen.isEmpty else {
            throw configurationFault("no push provider configured (--fcm-service-account, --apns-key-file, --vapid-subject; see --help)")
        }
        var logger = Logger(label: "countersign")
        logger.logLevel = .warning
        var failed = false
        for provider in chosen {
            do {
                switch provider {
                case .fcm: try await checkFCM(pushConfiguration, logger: logger)
                case .apns: try await checkAPNs(pushConfiguration)
                case .webPush: try checkWebPush(pushConfiguration, logger: logger)
                }
            } catch {
                Console.current.writeError("✗ \(provider.rawValue): \(error)\n")
                failed = true
            }
        }
        if failed { throw ExitCode.failure }
    }

    func checkFCM(_ pushConfiguration: PushConfiguration, logger: Logger) async throws {
        guard let file = pushConfiguration.serviceAccountFile else {
            throw CommandFailure(
                "no FCM service account configured (--fcm-service-account, COUNTERSIGN_FCM_SERVICE_ACCOUNT, fcm.serviceAccountFile or $CREDENTIALS_DIRECTORY)"
            )
        }
        let account = try ServiceAccount.load(path: file)
        print("✓ service account: \(account)")
        let client = try makeClient(caFile: pushConfiguration.caFile)
        do {
            let tokens = try await AccessTokenProvider(account: account, client: client, logger: logger, exchangeTimeout: limit)
            _ = try await tokens.token()
            print("✓ access token obtained from \(account.tokenURI)")
            if let token {
                // Only `post` is used: no device is marked whatever FCM answers.
                var configuration = FCMSender.Configuration(endpoint: pushConfiguration.endpoint)
                configuration.requestTimeout = TimeInterval(timeout)
                let sender = FCMSender(account: account, tokens: tokens, client: client, configuration: configuration, deadTokens: nil)
                let job = PushJob.resolved(requestID: "countersign-fcm-check", userID: "check", status: .cancelled)
                if let message = FCMMessageBuilder.message(for: job, token: token, now: Date()) {
                    try await sender.post(message, validateOnly: true)
                    print("✓ FCM accepted a validate_only message for token \(Device.tokenSuffix(token)) at \(pushConfiguration.endpoint)")
                }
            }
            try await client.shutdown()
        } catch {
            try? await client.shutdown()
            throw error
        }
    }

    func checkAPNs(_ pushConfiguration: PushConfiguration) async throws {
        guard let apns = pushConfiguration.apns else {
            throw CommandFailure("APNs is not configured (--apns-key-file, --apns-key-id, --apns-team-id)")
        }
        let pem = try PushSetup.keyText(apns.keyFile, what: "APNs key")
        let tokens = try await APNsProviderToken(pem: pem, keyID: apns.keyID, teamID: apns.teamID)
        _ = try await tokens.token()
        print("✓ APNs key \(apns.keyID) of team \(apns.teamID) signs provider tokens")
        guard let topic = apnsTopic else {
            print("  (give --apns-topic BUNDLE_ID to have APNs check the key: nothing is delivered)")
            return
        }
        let client = try makeClient(caFile: apns.caFile)
        var configuration = apns.url.map(APNsSender.Configuration.init(url:)) ?? APNsSender.Configuration()
        configuration.requestTimeout = TimeInterval(timeout)
        let sender = APNsSender(tokens: tokens, client: client, configuration: configuration, deadTokens: nil)
        do {
            try await sender.checkCredentials(topic: topic)
            try await client.shutdown()
        } catch {
            try? await client.shutdown()
            throw error
        }
        print("✓ APNs at \(configuration.productionURL) accepted the provider token for \(topic) (BadDeviceToken for a device that cannot exist)")
    }

    func checkWebPush(_ pushConfiguration: PushConfiguration, logger: Logger) throws {
        guard let webPush = pushConfiguration.webPush else { throw CommandFailure("Web Push is not configured (--vapid-subject)") }
        let key = try VAPIDKeyFile.load(path: webPush.vapidKeyFile, create: false, logger: logger)
        print(
            "✓ VAPID key \(webPush.vapidKeyFile): public key \(SecureToken.base64URL(key.publicKey.x963Representation)), subject \(webPush.subject)")
    }
}

import ArgumentParser
import AsyncHTTPClient
import CountersignCore
import CountersignPush
import CountersignRuntime
import Foundation
import Logging

struct FCMCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "fcm", abstract: "Firebase Cloud Messaging tools.", subcommands: [Check.self])

    struct Check: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Load the service account, fetch an access token and, with --token, validate a message to that device."
        )
        @Option(help: "JSON config file (also COUNTERSIGN_CONFIG).") var config: String?
        @OptionGroup var push: PushOptions
        @Option(help: "A device's FCM registration token: send it a validate_only message (nothing is delivered).") var token: String?

        func run() async throws {
            let settings = try await loadOrExit {
                try ConfigurationLoader(flags: push.flags, environment: ProcessInfo.processInfo.environment, configFile: config).pushSettings()
            }
            guard let file = settings.serviceAccountFile else {
                throw ValidationError(
                    "no FCM service account configured (--fcm-service-account, COUNTERSIGN_FCM_SERVICE_ACCOUNT, fcm.serviceAccountFile or $CREDENTIALS_DIRECTORY)"
                )
            }
            let account = try await loadOrExit { try ServiceAccount.load(path: file) }
            print("✓ service account: \(account)")
            let client = try await loadOrExit { try PushSetup.makeClient(caFile: settings.caFile) }
            var logger = Logger(label: "countersign")
            logger.logLevel = .warning
            do {
                let tokens = try await AccessTokenProvider(account: account, client: client, logger: logger)
                _ = try await tokens.token()
                print("✓ access token obtained from \(account.tokenURI)")
                if let token {
                    // Only `post` is used: no device is marked whatever FCM answers.
                    let sender = FCMSender(
                        account: account, tokens: tokens, client: client, configuration: FCMSender.Configuration(endpoint: settings.endpoint),
                        deadTokens: nil)
                    let job = PushJob.resolved(requestID: "countersign-fcm-check", userID: "check", status: .cancelled)
                    guard let message = FCMMessageBuilder.message(for: job, token: token, now: Date()) else { return }
                    try await sender.post(message, validateOnly: true)
                    print("✓ FCM accepted a validate_only message for token \(Device.tokenSuffix(token)) at \(settings.endpoint)")
                }
                try await client.shutdown()
            } catch {
                try? await client.shutdown()
                FileHandle.standardError.write(Data("✗ \(error)\n".utf8))
                throw ExitCode.failure
            }
        }
    }
}

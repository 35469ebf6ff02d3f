import ArgumentParser
import CountersignCore
import CountersignMail
import CountersignPostgres
import CountersignPush
import CountersignRuntime
import Foundation
import Logging
import NIOSSL

/// `countersign config check`: what `serve` would start with, found without starting.
struct ConfigCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "config", abstract: "The daemon's configuration.", subcommands: [Check.self])

    struct Check: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Read every setting as serve would and print what it would start with, and where each value came from.",
            discussion: """
                Takes serve's options, reads the environment and the config file as serve does, reads the files serve \
                reads at start (the database and SMTP passwords, the secret key, the FCM service account, the APNs key, \
                the VAPID key; none is created; the database is not opened), and binds each listen address for a moment (one in use is said, not \
                refused: the running daemon holds it). Secrets are never printed. Exit status 0 when serve would start \
                with this configuration, 78 with one line naming the bad setting, where its value came from and what it \
                expects. Run it before restarting the daemon.
                """)

        @Option(help: configHelp, completion: .file()) var config: String?
        @OptionGroup var settings: ServeSettings
        @OptionGroup var output: JSONOption

        func run() async throws {
            let loader = try await loadOrExit { try settings.given.loader(config: config) }
            let configuration = try await loadOrExit { try loader.serveConfiguration() }
            // Run by root on the service's SQLite folder, read files as the service's user would, as the other commands do.
            if case .sqlite(let path) = configuration.database, FileManager.default.fileExists(atPath: path) {
                try ServiceUser.become(ownerOf: path)
            }
            let logger = Logger(label: "countersign") { _ in SwiftLogNoOpLogHandler() }
            let files = try await loadOrExit { try await Self.checkFiles(configuration, logger: logger) }
            var notes: [String] = []
            if let warning = OpenFileLimit.warning(longPolls: configuration.longPollsTotal, limit: OpenFileLimit.raise()) {
                notes.append("\(warning) (as this command runs; the unit's LimitNOFILE= sets the daemon's)")
            }
            for (address, what) in [(configuration.listen, "--listen"), configuration.metricsListen.map { ($0, "--metrics-listen") }].compactMap({
                $0
            }) {
                do {
                    try await ListenCheck.ensureFree(address, what: what)
                } catch let error as ConfigurationError where error.description.hasSuffix("Address already in use") {
                    notes.append("\(address.host):\(address.port) (\(what)) is in use now: by the running daemon, if it runs there")
                } catch let error as ConfigurationError {
                    throw configurationFault(error.description)
                }
            }

            let effective = try await loadOrExit { try loader.effectiveSettings() }
            if output.json {
                return printJSON(
                    CheckReport(
                        configFile: configFile(config),
                        settings: effective.map { .init(key: $0.setting.fileKey, flag: $0.setting.flag, value: $0.value, source: $0.source) },
                        files: files, notes: notes))
            }
            print("config file: \(configFile(config) ?? "none")")
            var group: SettingInfo.Group?
            for line in effective {
                if line.setting.group != group {
                    group = line.setting.group
                    print("\n\(line.setting.group.rawValue):")
                }
                print("  \(line.setting.fileKey) = \(line.value)  (\(line.source))")
            }
            print("\nfiles read at start:")
            for file in files { print("  \(file)") }
            for note in notes { print("note: \(note)") }
            print("\n✓ serve would start with this configuration")
        }

        /// The files `serve` reads at start, each read as it would read it, none created: one line each.
        static func checkFiles(_ configuration: ServeConfiguration, logger: Logger) async throws -> [String] {
            var lines: [String] = []
            let email = configuration.email
            let (keyPath, mayCreate) = try configuration.secretKeyLocation(environment: ProcessInfo.processInfo.environment)
            if FileManager.default.fileExists(atPath: keyPath) {
                _ = try SecretKeyFile.load(path: keyPath, create: false, logger: logger)
                lines.append("secret key: \(keyPath)")
            } else if mayCreate {
                lines.append("secret key: \(keyPath) (not there yet: serve creates it at first start)")
            } else {
                throw ConfigurationError("no secret key at \(keyPath)")
            }
            let push = configuration.push
            var fcmOn = false
            if let file = push.serviceAccountFile {
                guard let data = FileManager.default.contents(atPath: file) else {
                    throw ConfigurationError("cannot read FCM service account file \(file)")
                }
                if ServiceAccount.isEmptyFile(data) {
                    lines.append("FCM service account: \(file) is empty: FCM push off")
                } else {
                    do {
                        let account = try ServiceAccount.parse(data, source: file)
                        lines.append("FCM service account: \(file) (\(account))")
                        fcmOn = true
                    } catch {
                        throw ConfigurationError("\(error)")
                    }
                }
            }
            if let apns = push.apns {
                do {
                    let pem = try PushSetup.keyText(apns.keyFile, what: "APNs key")
                    _ = try await APNsProviderToken(pem: pem, keyID: apns.keyID, teamID: apns.teamID)
                    lines.append("APNs key: \(apns.keyFile) (key \(apns.keyID), team \(apns.teamID))")
                } catch {
                    throw ConfigurationError("the APNs key \(apns.keyFile): \(error)")
                }
            }
            // The extra trusted CAs of the clients serve makes: each as that client loads it.
            for (what, file) in [("FCM", fcmOn ? push.caFile : nil), ("APNs", push.apns?.caFile), ("SMTP", email.smtp?.caFile)] {
                guard let file else { continue }
                do {
                    _ = try NIOSSLCertificate.fromPEMFile(file)
                    lines.append("\(what) CA file: \(file)")
                } catch {
                    throw ConfigurationError("the \(what) CA file \(file): \(error)")
                }
            }
            if email.smtp != nil, let folder = email.templatesDirectory {
                do {
                    _ = try MailTemplates(directory: folder)
                    lines.append("mail templates: \(folder)")
                } catch {
                    throw ConfigurationError("the mail templates in \(folder): \(error)")
                }
            }
            if let webPush = configuration.push.webPush {
                if FileManager.default.fileExists(atPath: webPush.vapidKeyFile) {
                    do {
                        _ = try VAPIDKeyFile.load(path: webPush.vapidKeyFile, create: false, logger: logger)
                    } catch {
                        throw ConfigurationError("the VAPID key \(webPush.vapidKeyFile): \(error)")
                    }
                    lines.append("VAPID key: \(webPush.vapidKeyFile)")
                } else if webPush.createKey {
                    lines.append("VAPID key: \(webPush.vapidKeyFile) (not there yet: serve creates it at first start)")
                } else {
                    throw ConfigurationError("no VAPID key at \(webPush.vapidKeyFile): a cluster's nodes share one, made beforehand")
                }
            }
            return lines
        }
    }
}

/// `config check --json`: what serve would start with, as one object.
struct CheckReport: Encodable {
    struct Line: Encodable {
        let key: String
        let flag: String
        let value: String
        let source: String
    }

    let configFile: String?
    let settings: [Line]
    let files: [String]
    let notes: [String]
}

import ArgumentParser
import CountersignCore
import CountersignHTTP
import CountersignPush
import Foundation
import Logging

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Run the daemon.")

    @Option(help: "JSON config file (also COUNTERSIGN_CONFIG).") var config: String?
    @Option(help: "Address to listen on, HOST:PORT (default 127.0.0.1:8080).") var listen: String?
    @Option(help: "SQLite database file (default $STATE_DIRECTORY/countersign.sqlite, else ./countersign.sqlite).")
    var database: String?
    @Option(help: "Seconds a request stays pending (default 60).") var requestTTL: String?
    @Option(help: "Seconds an approved request may wait for completion (default 120).") var completionWindow: String?
    @Option(help: "Number matching: required or off (default required).") var numberMatching: String?
    @Option(help: "bcrypt cost, 4…31 (default 12).") var bcryptCost: String?
    @Option(help: "Log level: trace, debug, info, notice, warning, error, critical (default info).") var logLevel: String?
    @Option(name: .customLong("rate-limit"), help: "Override a rate limit, NAME=COUNT/SECONDS (repeatable).")
    var rateLimits: [String] = []
    @Option(name: .customLong("trusted-proxy"), help: "A proxy whose X-Forwarded-For is believed, IP or CIDR (repeatable).")
    var trustedProxies: [String] = []
    @Option(help: "Seconds a fraud report silences the user's prompts (default 3600).") var fraudSilence: String?
    @Option(help: "Days audit events and finished requests are kept (default 90).") var auditRetentionDays: String?
    @OptionGroup var push: PushOptions

    func run() async throws {
        let flags: [String: String?] = [
            "--listen": listen, "--database": database, "--request-ttl": requestTTL,
            "--completion-window": completionWindow, "--number-matching": numberMatching,
            "--bcrypt-cost": bcryptCost, "--log-level": logLevel, "--fraud-silence": fraudSilence,
            "--audit-retention-days": auditRetentionDays,
        ].merging(push.flags) { $1 }
        let configuration = try await loadOrExit {
            try ConfigurationLoader(
                flags: flags.compactMapValues { $0 },
                lists: ["--rate-limit": rateLimits, "--trusted-proxy": trustedProxies],
                environment: ProcessInfo.processInfo.environment,
                configFile: config
            ).serveConfiguration()
        }
        let logger = bootstrapLogging(level: configuration.logLevel)
        logger.info(
            "starting",
            metadata: [
                "database": "\(configuration.databasePath)",
                "listen": "\(configuration.host):\(configuration.port)",
                "requestTTL": "\(Int(configuration.broker.requestTTL))",
                "completionWindow": "\(Int(configuration.broker.completionWindow))",
                "numberMatching": "\(configuration.broker.numberMatching ? "required" : "off")",
                "push": "\(configuration.push.serviceAccountFile.map { "FCM, service account \($0)" } ?? "disabled (no service account)")",
                "trustedProxies": "\(configuration.trustedProxies.map(\.description))",
            ]
        )
        let server = try await loadOrExit {
            try await buildServer(configuration: configuration, logger: logger, environment: ProcessInfo.processInfo.environment)
        }
        try await server.run(logger: logger)
    }
}

/// Runs `body`; a configuration or start-up fault ends the process with one
/// clear line on standard error (exit 78, EX_CONFIG, for a bad setting).
func loadOrExit<T>(_ body: () async throws -> T) async throws -> T {
    do {
        return try await body()
    } catch let error as ConfigurationError {
        FileHandle.standardError.write(Data("countersign: \(error.description)\n".utf8))
        throw ExitCode(78)
    } catch let error as any CustomStringConvertible & Error {
        FileHandle.standardError.write(Data("countersign: \(error.description)\n".utf8))
        throw ExitCode.failure
    }
}

func bootstrapLogging(level: Logger.Level) -> Logger {
    LoggingSystem.bootstrap { label in
        var handler = StreamLogHandler.standardError(label: label)
        handler.logLevel = level
        return handler
    }
    return Logger(label: "countersign")
}

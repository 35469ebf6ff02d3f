import ArgumentParser
import CountersignCore
import CountersignPush
import CountersignRuntime
import Foundation
import Logging

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Run the daemon.")

    @Option(help: configHelp, completion: .file()) var config: String?
    @OptionGroup var settings: ServeSettings

    func run() async throws {
        let configFile = configFile(config)
        let loader = try await loadOrExit { try settings.given.loader(config: config) }
        // A refusal is written in the configured log format (one JSON object with --log-format json) once that is known:
        // only a config file that cannot be read, or a bad --log-format itself, is a plain line.
        let format = (try? loader.logFormat()).flatMap { $0 } ?? .text
        let configuration = try await loadOrExit(format: format) { try loader.serveConfiguration() }
        // Before the database is opened or migrated: a daemon that cannot listen changes nothing.
        try await loadOrExit(format: format) {
            try await ListenCheck.ensureFree(configuration.listen, what: "--listen", attempts: 5)
            if let metrics = configuration.metricsListen { try await ListenCheck.ensureFree(metrics, what: "--metrics-listen", attempts: 5) }
        }
        let logger = bootstrapLogging(level: configuration.logLevel, format: configuration.logFormat)
        logger.info("starting", metadata: configuration.startupSummary.merging(["config": "\(configFile ?? "none")"]) { $1 })
        if let warning = OpenFileLimit.warning(longPolls: configuration.longPollsTotal, limit: OpenFileLimit.raise()) {
            logger.warning("\(warning)")
        }
        let server = try await loadOrExit(format: format) {
            try await buildApplication(configuration: configuration, logger: logger, environment: ProcessInfo.processInfo.environment)
        }
        try await server.run(logger: logger)
    }
}

/// Runs `body`; a configuration or start-up fault ends the process with one
/// clear line on standard error (exit 78, EX_CONFIG, for a bad setting), in
/// `format` once the configuration said which.
func loadOrExit<T>(format: LogFormat = .text, _ body: () async throws -> T) async throws -> T {
    do {
        return try await body()
    } catch let error as ConfigurationError {
        throw configurationFault(error.description, format: format)
    } catch let error as NewerDatabaseError {
        throw configurationFault(error.description, format: format)
    } catch let error as any CustomStringConvertible & Error {
        faultLine(error.description, format: format)
        throw ExitCode.failure
    }
}

/// Says a configuration fault in one line on standard error and gives exit status 78 (EX_CONFIG).
func configurationFault(_ message: String, format: LogFormat = .text) -> ExitCode {
    faultLine(message, format: format)
    return ExitCode(78)
}

/// One line on standard error: `countersign: MESSAGE` (with the journal's error priority when standard
/// error is the journal), or with `--log-format json` one object as every other log line is.
func faultLine(_ message: String, format: LogFormat) {
    // An admin command run by root works as the database folder's owner: say so beside what failed.
    let message = ServiceUser.actingAs.map { message.hasSuffix("(\($0))") ? message : "\(message) (\($0))" } ?? message
    let journal = DaemonLogHandler.standardErrorIsJournal(environment: ProcessInfo.processInfo.environment)
    switch format {
    case .text:
        Console.current.writeError("\(journal ? "<3>" : "")countersign: \(message)\n")
    case .json:
        let logger = Logger(label: "countersign") { DaemonLogHandler(label: $0, level: .error, format: .json, journal: journal) }
        logger.error("\(message)")
    }
}

func bootstrapLogging(level: Logger.Level, format: LogFormat = .text) -> Logger {
    let journal = DaemonLogHandler.standardErrorIsJournal(environment: ProcessInfo.processInfo.environment)
    LoggingSystem.bootstrap { label in DaemonLogHandler(label: label, level: level, format: format, journal: journal) }
    return Logger(label: "countersign")
}

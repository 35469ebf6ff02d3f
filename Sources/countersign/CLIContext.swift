import ArgumentParser
import CountersignCore
import CountersignRuntime
import CountersignStore
import Foundation
import Logging

/// Options every database command takes.
struct DatabaseOptions: ParsableArguments {
    @Option(
        help: """
            SQLite database file (default $STATE_DIRECTORY/countersign.sqlite, else ./countersign.sqlite), \
            or a cluster's postgres:// URL (also COUNTERSIGN_DATABASE).
            """)
    var database: String?

    @Option(help: "File holding the PostgreSQL password, when the URL has none (also COUNTERSIGN_DATABASE_PASSWORD_FILE).")
    var databasePasswordFile: String?

    @Option(help: "The daemon's JSON config file: its database and the other settings this command reads (also COUNTERSIGN_CONFIG).")
    var config: String?

    /// The settings as `serve` finds them: these flags (and `extra`), the environment, the config file.
    func loader(_ extra: [String: String] = [:]) throws -> ConfigurationLoader {
        var flags = extra
        flags[ConfigurationLoader.database.flag] = database
        flags[ConfigurationLoader.databasePasswordFile.flag] = databasePasswordFile
        return try ConfigurationLoader(flags: flags, environment: ProcessInfo.processInfo.environment, configFile: config)
    }

    /// The database `serve` uses. A SQLite file that does not exist is an error
    /// naming the path (a mistyped path must not make a new, empty database),
    /// unless `creating` (`user add`, `integration add`: the first may come before the first start).
    func open(creating: Bool = false) async throws -> any CountersignStorage {
        let location = try await loadOrExit { try loader().database() }
        if case .sqlite(let path) = location, !creating, !FileManager.default.fileExists(atPath: path) {
            throw CommandFailure("no database at \(path): give --database or --config, or start the daemon once (it creates it)")
        }
        var logger = Logger(label: "countersign")
        logger.logLevel = .warning
        return try await loadOrExit { try await location.open(nodeID: { "cli-\(DatabaseLocation.hostName())-\(getpid())" }, logger: logger) }.store
    }
}

/// Reads one line from standard input without echo when it is a terminal.
func readSecretLine(prompt: String) -> String? {
    let interactive = isatty(STDIN_FILENO) == 1
    var saved = termios()
    if interactive {
        FileHandle.standardError.write(Data(prompt.utf8))
        tcgetattr(STDIN_FILENO, &saved)
        var silent = saved
        silent.c_lflag &= ~tcflag_t(ECHO)
        tcsetattr(STDIN_FILENO, TCSANOW, &silent)
    }
    defer {
        if interactive {
            tcsetattr(STDIN_FILENO, TCSANOW, &saved)
            FileHandle.standardError.write(Data("\n".utf8))
        }
    }
    return readLine(strippingNewline: true)
}

/// Reads and checks a new password from standard input.
func readNewPassword() throws -> String {
    guard let password = readSecretLine(prompt: "New password: "), !password.isEmpty else {
        throw CommandFailure("no password on standard input (give it as one line)")
    }
    if let violation = PasswordPolicy.violation(of: password) {
        throw CommandFailure(violation)
    }
    return password
}

/// The cost passwords are hashed at: the flag, else the environment, else
/// the same JSON config file `serve` reads (`--config` or `COUNTERSIGN_CONFIG`).
struct BcryptOption: ParsableArguments {
    @Option(help: "bcrypt cost, 4…31 (default: the config file's bcryptCost, else 12; also COUNTERSIGN_BCRYPT_COST).") var bcryptCost: String?

    func hasher(_ database: DatabaseOptions) async throws -> BcryptPasswordHasher {
        let cost = try await loadOrExit {
            try database.loader(bcryptCost.map { [ConfigurationLoader.bcryptCost.flag: $0] } ?? [:]).bcryptCost()
        }
        return BcryptPasswordHasher(cost: cost)
    }
}

/// A command that could not do what it was asked (no such user, a password
/// too short, an integration that has no webhook): one line on standard
/// error and exit status 1, without the usage text of a mistyped command (64).
struct CommandFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

import ArgumentParser
import CountersignCore
import CountersignRuntime
import CountersignStore
import Foundation
import Logging

/// Options every database command takes.
struct DatabaseOptions: ParsableArguments {
    @Option(
        name: ConfigurationLoader.database.name,
        help: ConfigurationLoader.database.help(
            "The SQLite database file, or a cluster's postgres:// URL.", default: "the config file's, else as serve finds it", value: "file-or-url"))
    var database: String?

    @Option(
        name: ConfigurationLoader.databasePasswordFile.name,
        help: ConfigurationLoader.databasePasswordFile.help("File holding the PostgreSQL password, when the URL has none.", value: "file"))
    var databasePasswordFile: String?

    @Option(help: operatorConfigHelp)
    var config: String?

    /// The settings as `serve` finds them: these flags (and `extra`), the environment, the config file.
    func loader(_ extra: [String: String] = [:]) throws -> ConfigurationLoader {
        var flags = extra
        flags[ConfigurationLoader.database.flag] = database
        flags[ConfigurationLoader.databasePasswordFile.flag] = databasePasswordFile
        return try ConfigurationLoader(flags: flags, environment: ProcessInfo.processInfo.environment, configFile: operatorConfigFile(config))
    }

    /// The database `serve` uses. A SQLite file that does not exist is an error
    /// naming the path (a mistyped path must not make a new, empty database),
    /// unless `creating` (`user add`, `integration add`: the first may come before the first start).
    func open(creating: Bool = false) async throws -> any CountersignStorage {
        let location = try await loadOrExit { try loader().database() }
        if case .sqlite(let path) = location {
            if !creating, !FileManager.default.fileExists(atPath: path) {
                throw CommandFailure("no database at \(path): give --database or --config, or start the daemon once (it creates it)")
            }
            try ServiceUser.become(ownerOf: path)
        }
        var logger = Logger(label: "countersign")
        logger.logLevel = .warning
        return try await loadOrExit { try await location.open(nodeID: { "cli-\(DatabaseLocation.hostName())-\(getpid())" }, logger: logger) }.store
    }
}

/// The package's config file.
let installedConfigFile = "/etc/countersign/countersign.json"

/// The config file an operator's command reads: `--config`, else `COUNTERSIGN_CONFIG`, else the package's
/// `/etc/countersign/countersign.json` when it exists. (`serve` reads only the file it is given, and `demo` only its `--config`.)
func operatorConfigFile(_ flag: String?) -> String? {
    flag ?? ProcessInfo.processInfo.environment["COUNTERSIGN_CONFIG"]
        ?? (FileManager.default.fileExists(atPath: installedConfigFile) ? installedConfigFile : nil)
}

/// The help of an operator command's `--config`.
let operatorConfigHelp = ArgumentHelp(
    "The daemon's JSON config file, for the settings this command reads. Also COUNTERSIGN_CONFIG. (default: \(installedConfigFile) when it exists)",
    valueName: "file")

/// Reads one line from standard input without echo when it is a terminal.
func readSecretLine(prompt: String) -> String? {
    // A command run in-process by a test has no standard input of its own.
    if Console.current.isCapturing { return nil }
    let interactive = isatty(STDIN_FILENO) == 1
    var saved = termios()
    if interactive {
        Console.current.writeError(prompt)
        tcgetattr(STDIN_FILENO, &saved)
        var silent = saved
        silent.c_lflag &= ~tcflag_t(ECHO)
        tcsetattr(STDIN_FILENO, TCSANOW, &silent)
    }
    defer {
        if interactive {
            tcsetattr(STDIN_FILENO, TCSANOW, &saved)
            Console.current.writeError("\n")
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
    @Option(
        name: ConfigurationLoader.bcryptCost.name,
        help: ConfigurationLoader.bcryptCost.help("bcrypt cost, 4…31.", default: "12", value: "cost"))
    var bcryptCost: String?

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
    /// Once an admin command run by root works as the database folder's owner, the line says so.
    init(_ description: String) { self.description = ServiceUser.actingAs.map { "\(description) (\($0))" } ?? description }
}

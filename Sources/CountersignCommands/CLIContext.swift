import ArgumentParser
import CountersignCore
import CountersignRuntime
import CountersignStore
import Foundation
import Logging

/// Options every database command takes.
struct DatabaseOptions: ParsableArguments {
    @Option(\.database) var database: String?
    @Option(\.databasePasswordFile) var databasePasswordFile: String?
    @Option(help: configHelp, completion: .file()) var config: String?

    /// The settings as `serve` finds them: these options (and `extra`'s), the environment, the config file.
    func loader(_ extra: any ParsableArguments...) throws -> ConfigurationLoader {
        var given = GivenSettings(self)
        for group in extra { given.values.merge(GivenSettings(group).values) { $1 } }
        return try given.loader(config: config)
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
    @Option(\.bcryptCost) var bcryptCost: String?

    func hasher(_ database: DatabaseOptions) async throws -> BcryptPasswordHasher {
        let cost = try await loadOrExit { try database.loader(self).bcryptCost() }
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

/// `--json`: what a command prints, as JSON for scripts.
struct JSONOption: ParsableArguments {
    @Flag(help: "Print JSON for scripts: one object, or one object a line for a list (none for an empty one).") var json = false
}

/// One JSON object on one line: keys sorted, dates in ISO 8601, absent values left out.
func printJSON(_ value: some Encodable) {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
    encoder.dateEncodingStrategy = .iso8601
    print(String(decoding: (try? encoder.encode(value)) ?? Data("{}".utf8), as: UTF8.self))
}

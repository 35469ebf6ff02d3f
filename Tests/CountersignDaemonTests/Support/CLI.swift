import ArgumentParser
import CountersignCommands

/// Runs a `countersign` command in-process as the executable would: parsed
/// from `arguments`, its output and errors captured in the order written,
/// and the exit status ArgumentParser's `main` would end the process with.
/// For commands that need no process of their own: nothing here sets a
/// umask, reads standard input, takes signals or changes user (a command on a
/// folder root does not own refuses to, in-process); those run the binary.
/// A database a command creates here has the test process's umask, and a
/// PostgreSQL store it opens stays connected until the test process ends.
enum CLI {
    static func run(_ arguments: [String]) async -> (status: Int32, output: String) {
        let console = Console.capturing()
        let status = await Console.$current.withValue(console) { () async -> Int32 in
            do {
                var command = try Countersign.parseAsRoot(arguments)
                if var asynchronous = command as? any AsyncParsableCommand {
                    try await asynchronous.run()
                } else {
                    try command.run()
                }
                return 0
            } catch {
                let code = Countersign.exitCode(for: error)
                let message = Countersign.fullMessage(for: error)
                if !message.isEmpty {
                    if code == .success { console.write(message + "\n") } else { console.writeError(message + "\n") }
                }
                return code.rawValue
            }
        }
        return (status, console.outputAndErrors)
    }

    /// The commands a test runs in-process: the operator's commands on a
    /// database. `serve`, `demo`, `backup` (its files' mode comes from the
    /// process's umask), `device simulate` (standard input) and the push
    /// checks run the binary.
    static func runsInProcess(_ arguments: [String]) -> Bool {
        switch arguments.first {
        case "integration", "user", "audit", "migrate", "config", "--version", "--experimental-dump-help": true
        case "device": arguments.dropFirst().first == "list"
        default: false
        }
    }
}

import ArgumentParser
import CountersignCore

#if canImport(Glibc)
import Glibc
#endif

/// The `countersign` command and its subcommands. The executable is one call
/// to ``main()``; tests parse and run the commands in-process
/// (`Countersign.parseAsRoot`), their output captured by a ``Console``.
public struct Countersign: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "countersign",
        abstract: "Phone-approval broker: approve sensitive actions, such as password resets, from a trusted device.",
        version: CountersignVersion.current,
        subcommands: [
            Serve.self, UserCommand.self, DeviceCommand.self, IntegrationCommand.self, WebhookCommand.self, AuditCommand.self, PushCommand.self,
            FCMCommand.self,
            MailCommand.self, ConfigCommand.self, Migrate.self, Backup.self, Demo.self,
        ]
        // No default subcommand: a bare `countersign` prints this help, never starting a daemon in the current folder by surprise.
    )

    /// Every file this process creates (database, `-wal`, `-shm`, secret key,
    /// backups) is readable by its owner alone, whatever umask it was started with.
    public static func main() async {
        umask(0o077)
        await main(nil)
    }

    public init() {}
}

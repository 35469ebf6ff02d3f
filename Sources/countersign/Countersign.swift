import ArgumentParser
import CountersignCore

#if canImport(Glibc)
import Glibc
#endif

@main
struct Countersign: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "countersign",
        abstract: "Phone-approval broker: approve sensitive actions, such as password resets, from a trusted device.",
        version: CountersignVersion.current,
        subcommands: [
            Serve.self, UserCommand.self, DeviceCommand.self, IntegrationCommand.self, WebhookCommand.self, AuditCommand.self, PushCommand.self,
            FCMCommand.self,
            MailCommand.self, Migrate.self, Backup.self, Demo.self,
        ]
        // No default subcommand: a bare `countersign` prints this help, never starting a daemon in the current folder by surprise.
    )

    /// Every file this process creates (database, `-wal`, `-shm`, secret key,
    /// backups) is readable by its owner alone, whatever umask it was started with.
    static func main() async {
        umask(0o077)
        await main(nil)
    }
}

import ArgumentParser

#if canImport(Glibc)
import Glibc
#endif

@main
struct Countersign: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "countersign",
        abstract: "Phone-approval broker: approve sensitive actions, such as password resets, from a trusted device.",
        subcommands: [
            Serve.self, UserCommand.self, DeviceCommand.self, IntegrationCommand.self, WebhookCommand.self, AuditCommand.self, PushCommand.self,
            FCMCommand.self,
            MailCommand.self, Migrate.self, Demo.self,
        ],
        defaultSubcommand: Serve.self
    )

    /// Every file this process creates (database, `-wal`, `-shm`, secret key,
    /// backups) is readable by its owner alone, whatever umask it was started with.
    static func main() async {
        umask(0o077)
        await main(nil)
    }
}

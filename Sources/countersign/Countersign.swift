import ArgumentParser

@main
struct Countersign: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "countersign",
        abstract: "Phone-approval broker: approve sensitive actions, such as password resets, from a trusted device.",
        subcommands: [
            Serve.self, UserCommand.self, DeviceCommand.self, IntegrationCommand.self, WebhookCommand.self, AuditCommand.self, FCMCommand.self,
            MailCommand.self, Migrate.self, Demo.self,
        ],
        defaultSubcommand: Serve.self
    )
}

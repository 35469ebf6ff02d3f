import ArgumentParser
import CountersignCore
import CountersignMail
import CountersignRuntime
import Foundation
import Logging

struct MailCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "mail", abstract: "Mail tools.", subcommands: [Test.self])

    struct Test: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Send one test mail with the configured SMTP settings and print the server's answer."
        )
        @Option(help: configHelp, completion: .file()) var config: String?
        @OptionGroup var mail: MailOptions
        @Option(help: ArgumentHelp("Where to send the test mail.", valueName: "address")) var to: String

        func run() async throws {
            let smtp = try await loadOrExit {
                try GivenSettings(mail).loader(config: config)
                    .smtpConfiguration()
            }
            guard let smtp else {
                throw configurationFault("no SMTP server configured (--smtp-url, COUNTERSIGN_SMTP_URL or smtp.url in the config file)")
            }
            print("→ \(smtp.summary)")
            let mailer = SMTPMailer(configuration: smtp)
            let message = MailMessage(
                to: to, subject: "Countersign test mail",
                text: "This is a test mail from Countersign. Mail delivery works.\n",
                html: "<p>This is a test mail from Countersign. Mail delivery works.</p>\n")
            let delivery = await mailer.send(message, logger: Logger(label: "countersign"))
            try await mailer.shutdown()
            switch delivery {
            case .accepted(let reply):
                print("✓ accepted: \(reply)")
            case .temporaryFailure(let reason):
                Console.current.writeError("✗ temporary failure (a daemon would retry): \(reason)\n")
                throw ExitCode.failure
            case .permanentFailure(let reason):
                Console.current.writeError("✗ refused: \(reason)\n")
                throw ExitCode.failure
            }
        }
    }
}

import ArgumentParser
import CountersignCore
import CountersignStore
import Foundation

/// The operator's side of the approvals API. Each command works on the
/// database a running daemon uses and takes effect at its next request.
struct IntegrationCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "integration",
        abstract: "Manage integrations: the relying services that use the approvals API.",
        subcommands: [
            Add.self, List.self, RotateKey.self, SetWebhook.self, RotateWebhookSecret.self, Disable.self, Enable.self, Delete.self, Grant.self,
            RevokeGrant.self, PromptAllUsers.self,
        ]
    )

    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Create an integration; prints its API key (and webhook secret) once.")
        @Argument(help: "A unique name, shown on the phone: letters, digits, space, `_`, `.` or `-`, at most 64.") var name: String
        @Option(help: ArgumentHelp("Where its events are posted (https://, or http:// to a loopback host).", valueName: "url")) var webhookURL:
            String?
        @Flag(
            help: ArgumentHelp(
                "Let it prompt every user with a device (a deployment's single sign-on or VPN); it gives no enrollment, listing or removal."
            )) var promptAllUsers = false
        @OptionGroup var database: DatabaseOptions
        @OptionGroup var output: JSONOption

        /// Invalid values are refused as the parser refuses them: exit 64, with this command's usage.
        func validate() throws {
            guard Integration.isValidName(name) else {
                throw ValidationError(
                    "\(name) is not a valid name: 1 to 64 letters, digits, spaces, `_`, `.` or `-`, starting with a letter or digit")
            }
            if let webhookURL, let problem = Integration.webhookURLProblem(webhookURL) { throw ValidationError(problem) }
        }

        func run() async throws {
            let store = try await database.open(creating: true)
            let key = Integration.newAPIKey()
            let secret = webhookURL.map { _ in Integration.newWebhookSecret() }
            let integration = Integration(
                id: Integration.newID(), name: name, webhookURL: webhookURL, webhookSecret: secret, enabled: true, createdAt: Date(),
                promptsAllUsers: promptAllUsers)
            do {
                try await store.createIntegration(integration, apiKeyHash: SecureToken.sha256Hex(key))
            } catch IntegrationError.nameTaken {
                throw CommandFailure("an integration named \(name) already exists")
            }
            try await store.append([
                AuditEvent(
                    kind: .integrationAdded,
                    detail: "integration \(name)" + (webhookURL.map { " with webhook to \(Self.host($0))" } ?? "")
                        + (promptAllUsers ? "; prompts all users" : ""))
            ])
            if output.json {
                return printJSON(["id": integration.id, "name": name, "apiKey": key, "webhookSecret": secret].compactMapValues { $0 })
            }
            print("created integration \(name)")
            print("id:             \(integration.id)")
            print("API key:        \(key)")
            if let secret { print("webhook secret: \(secret)") }
            print("These are shown once: store them in the relying service's secrets now.")
        }

        static func host(_ url: String) -> String { URL(string: url)?.host ?? "?" }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List integrations.")
        @OptionGroup var database: DatabaseOptions
        @OptionGroup var output: JSONOption

        func run() async throws {
            let store = try await database.open()
            let integrations = try await store.integrations()
            if output.json {
                for integration in integrations {
                    printJSON(
                        IntegrationLine(
                            id: integration.id, name: integration.name, enabled: integration.enabled, promptsAllUsers: integration.promptsAllUsers,
                            webhookURL: integration.webhookURL, webhookDisabledAt: integration.webhookDisabledAt,
                            webhookDisabledReason: integration.webhookDisabledAt == nil ? nil : integration.webhookDisabledReason,
                            createdAt: integration.createdAt))
                }
                return
            }
            if integrations.isEmpty { print("no integrations") }
            for integration in integrations {
                let state = integration.enabled ? "enabled" : "disabled"
                var webhook = integration.webhookURL.map { "webhook \($0)" } ?? "no webhook"
                if let since = integration.webhookDisabledAt {
                    // Told as stored; escaped, as a receiver's host is not ours to trust on a terminal.
                    let reason = LogText.escaped(integration.webhookDisabledReason ?? "410 Gone")
                    webhook += " (disabled since \(since.formatted(.iso8601)): \(reason); set-webhook enables it)"
                }
                let reach = integration.promptsAllUsers ? "prompts all users" : "prompts own and granted users"
                print(
                    "\(integration.id)  \(integration.name)  \(state)  \(reach)  \(webhook)  created \(integration.createdAt.formatted(.iso8601))")
            }
        }
    }

    struct RotateKey: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "rotate-key", abstract: "Give an integration a new API key; the old one stops at once.")
        @Argument(help: "The integration's id or name.") var integration: String
        @OptionGroup var database: DatabaseOptions
        @OptionGroup var output: JSONOption

        func run() async throws {
            let store = try await database.open()
            let found = try await find(integration, in: store)
            let key = Integration.newAPIKey()
            guard try await store.rotateIntegrationKey(id: found.id, apiKeyHash: SecureToken.sha256Hex(key)) else {
                throw CommandFailure("no integration \(integration)")
            }
            try await store.append([AuditEvent(kind: .integrationKeyRotated, detail: "integration \(found.name)")])
            if output.json { return printJSON(["id": found.id, "name": found.name, "apiKey": key]) }
            print("new API key for \(found.name): \(key)")
            print("The old key no longer works. This one is shown once.")
        }
    }

    struct SetWebhook: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "set-webhook",
            abstract: "Set or remove an integration's webhook URL. Its signing secret is kept (made on the first URL) unless --rotate-secret.")
        @Argument(help: "The integration's id or name.") var integration: String
        @Argument(help: "The webhook URL (https://, or http:// to a loopback host).") var url: String?
        @Flag(help: "Remove the webhook: no more events are queued.") var none = false
        @Flag(help: "Give the webhook a new signing secret (printed once); the old one stops signing at once.") var rotateSecret = false
        @OptionGroup var database: DatabaseOptions
        @OptionGroup var output: JSONOption

        func validate() throws {
            guard (url == nil) == none else { throw ValidationError("give either a URL or --none") }
            if rotateSecret && none { throw ValidationError("--rotate-secret goes with a URL") }
            if let url, let problem = Integration.webhookURLProblem(url) { throw ValidationError(problem) }
        }

        func run() async throws {
            let store = try await database.open()
            let found = try await find(integration, in: store)
            let secret = url.map { _ in (rotateSecret ? nil : found.webhookSecret) ?? Integration.newWebhookSecret() }
            guard try await store.setWebhook(integrationID: found.id, url: url, secret: secret) else {
                throw CommandFailure("no integration \(integration)")
            }
            try await store.append([
                AuditEvent(
                    kind: .integrationWebhookSet,
                    detail: "integration \(found.name): " + (url.map { "webhook to \(Add.host($0))" } ?? "webhook removed"))
            ])
            if output.json {
                // The secret only when it is new: it is shown once.
                return printJSON(
                    ["name": found.name, "webhookURL": url, "webhookSecret": secret == found.webhookSecret ? nil : secret].compactMapValues { $0 })
            }
            if let url, let secret {
                print("webhook of \(found.name): \(url)")
                if secret != found.webhookSecret { print("webhook secret: \(secret)  (shown once)") } else { print("signing secret unchanged") }
            } else {
                print("webhook of \(found.name) removed")
            }
        }
    }

    struct RotateWebhookSecret: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "rotate-webhook-secret",
            abstract: "Give the webhook a new signing secret (printed once); events are signed with both for 24 hours.")
        @Argument(help: "The integration's id or name.") var integration: String
        @OptionGroup var database: DatabaseOptions
        @OptionGroup var output: JSONOption

        func run() async throws {
            let store = try await database.open()
            let found = try await find(integration, in: store)
            let secret = Integration.newWebhookSecret()
            let until = Date().addingTimeInterval(Integration.webhookSecretOverlap)
            guard try await store.rotateWebhookSecret(integrationID: found.id, secret: secret, previousUntil: until) else {
                throw CommandFailure("\(found.name) has no webhook")
            }
            try await store.append([
                AuditEvent(kind: .integrationWebhookSet, detail: "integration \(found.name): webhook secret rotated; the old one signs too for 24 h")
            ])
            if output.json { return printJSON(["name": found.name, "webhookSecret": secret, "previousSecretUntil": Timestamp.string(until)]) }
            print("webhook secret: \(secret)  (shown once)")
            print("Events are signed with the new and the old secret until \(Timestamp.string(until)); move receivers over before then.")
        }
    }

    struct Disable: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Disable an integration: its API key is refused (401) until enabled.")
        @Argument(help: "The integration's id or name.") var integration: String
        @OptionGroup var database: DatabaseOptions

        func run() async throws { try await setEnabled(false, integration, database) }
    }

    struct Delete: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Delete an integration: its key, codes, grants, webhook and ownerships end, in one transaction.",
            discussion: """
                Its live approvals are cancelled and its waiting webhook events dropped. The users it created \
                stay, with their devices, as nobody's: erase them first (`countersign user delete`) if they should go.
                """)
        @Argument(help: "The integration's id or name.") var integration: String
        @OptionGroup var database: DatabaseOptions
        @OptionGroup var output: JSONOption

        func run() async throws {
            let store = try await database.open()
            let found = try await find(integration, in: store)
            let now = Date()
            let event = AuditEvent(at: now, kind: .integrationDeleted, detail: "integration \(found.name); countersign integration delete")
            guard let deleted = try await store.deleteIntegration(id: found.id, at: now, audit: event) else {
                throw CommandFailure("no integration \(integration)")
            }
            if output.json {
                return printJSON(
                    DeletedIntegrationLine(
                        id: found.id, name: found.name, approvalsCancelled: deleted.cancelled.count, usersReleased: deleted.usersReleased,
                        grantsEnded: deleted.grantsEnded, eventsDropped: deleted.eventsDropped))
            }
            print(
                "deleted \(found.name): \(deleted.cancelled.count) live approvals cancelled, \(deleted.eventsDropped) webhook events dropped, "
                    + "\(deleted.grantsEnded) grants ended; \(deleted.usersReleased) users it created are nobody's now")
        }
    }

    struct Enable: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Enable a disabled integration.")
        @Argument(help: "The integration's id or name.") var integration: String
        @OptionGroup var database: DatabaseOptions

        func run() async throws { try await setEnabled(true, integration, database) }
    }

    /// An integration and a user, as the grant commands name them.
    struct GrantArguments: ParsableArguments {
        @Argument(help: "The integration's id or name.") var integration: String
        @Argument(help: "The user's email.") var email: String
        @OptionGroup var database: DatabaseOptions

        func resolve() async throws -> (store: any CountersignStorage, integration: Integration, user: User) {
            let store = try await database.open()
            let found = try await find(integration, in: store)
            guard let user = try await store.user(email: email) else { throw CommandFailure("no user \(email)") }
            return (store, found, user)
        }
    }

    struct Grant: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Let an integration enroll and list devices for a user it did not create (a password user, or another's).")
        @OptionGroup var arguments: GrantArguments

        func run() async throws {
            let (store, found, user) = try await arguments.resolve()
            let granted = try await store.grantUser(integrationID: found.id, userID: user.id, at: Date())
            if granted {
                try await store.append([AuditEvent(kind: .integrationGranted, userID: user.id, detail: "integration \(found.name)")])
            }
            print(granted ? "\(found.name) may now enroll devices for \(user.email)" : "\(found.name) already reaches \(user.email)")
        }
    }

    struct RevokeGrant: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "revoke-grant", abstract: "Take a grant back; the integration's unused codes for the user stop working.")
        @OptionGroup var arguments: GrantArguments

        func run() async throws {
            let (store, found, user) = try await arguments.resolve()
            guard try await store.revokeGrant(integrationID: found.id, userID: user.id) else {
                throw CommandFailure("\(found.name) has no grant for \(user.email)")
            }
            try await store.append([AuditEvent(kind: .integrationGrantRevoked, userID: user.id, detail: "integration \(found.name)")])
            print("\(found.name) no longer reaches \(user.email); devices it enrolled stay until removed")
        }
    }
}

extension IntegrationCommand {
    struct PromptAllUsers: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "prompt-all-users",
            abstract: "Let an integration prompt every user with a device (on), or only its own and granted users (off).")
        @Argument(help: "The integration's id or name.") var integration: String
        @Argument(help: "on or off.") var setting: String
        @OptionGroup var database: DatabaseOptions

        func validate() throws {
            guard setting == "on" || setting == "off" else { throw ValidationError("expected on or off, not \(setting)") }
        }

        func run() async throws {
            let store = try await database.open()
            let found = try await find(integration, in: store)
            let on = setting == "on"
            guard try await store.setPromptsAllUsers(integrationID: found.id, on: on) else { throw CommandFailure("no integration \(integration)") }
            try await store.append([
                AuditEvent(kind: .integrationPromptAllUsers, detail: "integration \(found.name); prompt all users \(setting)")
            ])
            print(on ? "\(found.name) may now prompt every user with a device" : "\(found.name) prompts only its own and granted users")
        }
    }
}

/// The integration named by `idOrName`.
func find(_ idOrName: String, in store: any IntegrationStore) async throws -> Integration {
    if let byID = try await store.integration(id: idOrName) { return byID }
    guard let byName = try await store.integrations().first(where: { $0.name == idOrName }) else {
        throw CommandFailure("no integration \(idOrName)")
    }
    return byName
}

private func setEnabled(_ enabled: Bool, _ idOrName: String, _ database: DatabaseOptions) async throws {
    let store = try await database.open()
    let found = try await find(idOrName, in: store)
    _ = try await store.setIntegrationEnabled(id: found.id, enabled: enabled)
    try await store.append([AuditEvent(kind: enabled ? .integrationEnabled : .integrationDisabled, detail: "integration \(found.name)")])
    print("\(found.name) \(enabled ? "enabled" : "disabled")")
}

struct WebhookCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "webhook", abstract: "Webhook deliveries of the approvals API.", subcommands: [List.self, Redeliver.self])

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List webhook deliveries, newest first.")
        @Flag(help: "Only events that failed, were dropped, or are being retried.") var failed = false
        @Option(help: ArgumentHelp("How many to show.", valueName: "count")) var limit = 50
        @OptionGroup var database: DatabaseOptions
        @OptionGroup var output: JSONOption

        func run() async throws {
            let store = try await database.open()
            let entries = try await store.webhookDeliveries(integrationID: nil, failedOnly: failed, limit: max(1, min(limit, 10_000)))
            if entries.isEmpty && !output.json { print(failed ? "no failed deliveries" : "no webhook deliveries") }
            for entry in entries {
                let event = entry.payload.flatMap(WebhookEvent.Envelope.init)
                let state =
                    entry.state == "pending"
                    ? (entry.attempts == 0 ? "queued" : "retrying at \(entry.nextAttemptAt.formatted(.iso8601))") : entry.state
                // The request by its reference, as the audit trail files it (`audit --request REF`); never its id, a credential.
                // A test event tells of no request.
                let reference = event.map { $0.data.approvalId.map(ApprovalRequest.logReference(of:)) ?? "-" } ?? "?"
                var line = "\(entry.id)  \(event?.type ?? "?")  request \(reference)  \(state)"
                line += "  attempts \(entry.attempts)  created \(entry.createdAt.formatted(.iso8601))"
                if let error = entry.lastError { line += "  last error: \(LogText.escaped(error))" }
                if output.json {
                    printJSON(
                        DeliveryLine(
                            id: entry.id, type: event?.type, request: reference, state: entry.state, attempts: entry.attempts,
                            nextAttemptAt: entry.state == "pending" ? entry.nextAttemptAt : nil, createdAt: entry.createdAt,
                            lastError: entry.lastError))
                    continue
                }
                print(line)
            }
        }
    }

    struct Redeliver: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Send a webhook event again (the running daemon picks it up within a second).")
        @Argument(help: "The event id (evt_…).") var eventID: String
        @OptionGroup var database: DatabaseOptions

        func run() async throws {
            let store = try await database.open()
            guard let about = try await store.redeliverWebhook(eventID: eventID, integrationID: nil, finishedOnly: false, now: Date()) else {
                throw CommandFailure("no webhook event \(eventID) that can be sent again (unknown, or being sent right now)")
            }
            // Told like the daemon's own webhook audit events: the approval's log reference, the integration's name.
            // A test event is about its integration, and tells of no approval.
            let approval = try await store.request(id: about)
            var subject = ""
            if let integration = try await store.integration(id: approval?.integrationID ?? about) {
                subject = "integration \(integration.name): "
            }
            try await store.append([
                AuditEvent(
                    kind: .webhookRedelivered, userID: approval?.userID, requestRef: approval.map { _ in ApprovalRequest.logReference(of: about) },
                    detail: "event \(eventID), \(subject)countersign webhook redeliver")
            ])
            print("event \(eventID) queued again")
        }
    }
}

/// `integration list --json`: one line an integration.
struct IntegrationLine: Encodable {
    let id: String
    let name: String
    let enabled: Bool
    let promptsAllUsers: Bool
    let webhookURL: String?
    /// Set when its receiver answered 410 Gone; `set-webhook` (or `PUT /v1/webhook`) clears it.
    let webhookDisabledAt: Date?
    let webhookDisabledReason: String?
    let createdAt: Date
}

/// `integration delete --json`.
struct DeletedIntegrationLine: Encodable {
    let id: String
    let name: String
    let approvalsCancelled: Int
    let usersReleased: Int
    let grantsEnded: Int
    let eventsDropped: Int
}

/// `webhook list --json`: one line a delivery (the request by its reference, never its id).
struct DeliveryLine: Encodable {
    let id: String
    let type: String?
    let request: String
    let state: String
    let attempts: Int
    let nextAttemptAt: Date?
    let createdAt: Date
    let lastError: String?
}

import ArgumentParser
import CountersignCore
import CountersignRuntime
import CountersignStore
import Foundation
import Logging

struct UserCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "user",
        abstract: "Manage user accounts.",
        subcommands: [Add.self, Passwd.self, List.self, Unlock.self, BypassCodes.self, Delete.self]
    )

    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Create a user; the password is read from standard input.")
        @Argument(help: "The user's email.") var email: String
        @OptionGroup var database: DatabaseOptions
        @OptionGroup var bcrypt: BcryptOption

        func validate() throws {
            guard User.normalize(email: email).contains("@") else { throw ValidationError("\(email) is not an email address") }
        }

        func run() async throws {
            let email = User.normalize(email: email)
            let store = try await database.open(creating: true)
            let password = try readNewPassword()
            let hash = try await bcrypt.hasher(database).hash(password)
            do {
                let user = try await store.createUser(email: email, passwordHash: hash)
                print("created user \(user.email) (id \(user.id))")
            } catch AccountError.emailTaken {
                if let owner = try await store.user(email: email)?.ownerIntegrationID {
                    let name = try await store.integration(id: owner)?.name ?? owner
                    throw CommandFailure(
                        "\(email) exists: integration \(name) created it (no password). "
                            + "`countersign user passwd \(email)` gives it a password and takes the account over from the integration")
                }
                throw CommandFailure("a user with email \(email) already exists")
            }
        }
    }

    struct Passwd: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Set a user's password, read from standard input.")
        @Argument(help: "The user's email.") var email: String
        @OptionGroup var database: DatabaseOptions
        @OptionGroup var bcrypt: BcryptOption

        func run() async throws {
            let store = try await database.open()
            guard let user = try await store.user(email: email) else { throw CommandFailure("no user with email \(email)") }
            let password = try readNewPassword()
            try await store.setPassword(userID: user.id, passwordHash: try await bcrypt.hasher(database).hash(password))
            print("password changed for \(user.email)")
        }
    }

    struct Unlock: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "End the prompt silence a fraud report put on a user, and the lock of too many wrong codes.")
        @Argument(help: "The user's email.") var email: String
        @OptionGroup var database: DatabaseOptions

        func run() async throws {
            let store = try await database.open()
            guard let user = try await store.user(email: email) else { throw CommandFailure("no user with email \(email)") }
            try await store.silencePrompts(userID: user.id, until: nil)
            _ = try await store.unlockCodes(userID: user.id)
            try await store.append([AuditEvent(kind: .userUnlocked, userID: user.id, detail: "countersign user unlock")])
            print("unlocked \(user.email): " + (user.isSilenced(at: Date()) ? "prompts resume; " : "") + "codes are accepted again")
        }
    }

    struct BypassCodes: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "bypass-codes",
            abstract: "Issue one-time bypass codes for a user without a device at hand (printed once), or void them.",
            discussion: """
                Each code approves one request, typed where the requester waits (verify-code), like an offline code. \
                New codes void the user's unused ones. They answer a relying service's approvals; a password reset \
                only with --for-password-reset. Stored as keyed hashes under the daemon's secret key.
                """)
        @Argument(help: "The user's email.") var email: String
        @Option(help: ArgumentHelp("How many codes, 1…100.", valueName: "count")) var count = 10
        @Option(help: ArgumentHelp("Days they stay valid, 1…365.", valueName: "days")) var valid = 30
        @Flag(help: "Let them answer a phone-approved password reset too.") var forPasswordReset = false
        @Flag(help: "Void the user's unused codes instead of issuing new ones.") var revoke = false
        @OptionGroup var database: DatabaseOptions
        @Option(\.secretKeyFile) var secretKeyFile: String?
        @OptionGroup var output: JSONOption

        func validate() throws {
            guard (1...100).contains(count) else { throw ValidationError("--count must be from 1 to 100") }
            guard (1...365).contains(valid) else { throw ValidationError("--valid must be from 1 to 365 days") }
        }

        func run() async throws {
            let store = try await database.open()
            guard let user = try await store.user(email: email) else { throw CommandFailure("no user with email \(email)") }
            let now = Date()
            if revoke {
                let voided = try await store.revokeBypassCodes(userID: user.id, now: now)
                try await store.append([
                    AuditEvent(kind: .bypassCodesRevoked, userID: user.id, detail: "\(voided) unused; countersign user bypass-codes --revoke")
                ])
                print("voided \(voided) unused bypass code\(voided == 1 ? "" : "s") of \(user.email)")
                return
            }
            let keys = try await loadOrExit { try secretKeyLoader().secretKeys(logger: Logger(label: "countersign")) }
            let codes = (0..<count).map { _ in BypassCode.generate() }
            let expiresAt = now.addingTimeInterval(TimeInterval(valid) * 86_400)
            try await store.replaceBypassCodes(
                userID: user.id, codeHashes: codes.map { BypassCode.hash($0, userID: user.id, keys: keys) },
                forPasswordReset: forPasswordReset, expiresAt: expiresAt, now: now)
            let scope = forPasswordReset ? "approvals and password resets" : "approvals (not password resets)"
            try await store.append([
                AuditEvent(
                    kind: .bypassCodesIssued, userID: user.id,
                    detail: "\(count) codes, valid \(valid) days, for \(scope); countersign user bypass-codes")
            ])
            if output.json {
                return printJSON(BypassCodesLine(email: user.email, codes: codes.map(BypassCode.display), validUntil: expiresAt, scope: scope))
            }
            print("\(count) bypass codes for \(user.email), each usable once, valid until \(expiresAt.formatted(.iso8601)) for \(scope).")
            print("They are shown only now; earlier unused codes no longer work.")
            for code in codes { print("  \(BypassCode.display(code))") }
        }

        func secretKeyLoader() throws -> ConfigurationLoader {
            try database.loader(self)
        }
    }

    struct Delete: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Erase a user: their devices, keys, codes, grants, resets and requests go, in one transaction.",
            discussion: """
                Live requests are cancelled first (an integration's with its webhook event). The audit trail \
                keeps the user's events, naming them by a keyed pseudonym instead of the email; \
                `countersign audit --email EMAIL` still finds them (it reads the same secret key).
                """)
        @Argument(help: "The user's email.") var email: String
        @OptionGroup var database: DatabaseOptions
        @Option(\.secretKeyFile) var secretKeyFile: String?
        @OptionGroup var output: JSONOption

        func run() async throws {
            let store = try await database.open()
            guard let user = try await store.user(email: email) else { throw CommandFailure("no user with email \(email)") }
            let keys = try await loadOrExit { try database.loader(self).secretKeys(logger: Logger(label: "countersign")) }
            let pseudonym = keys.auditPseudonym(email: user.email)
            let now = Date()
            let event = AuditEvent(
                at: now, kind: .userErased, userID: user.id, email: pseudonym, detail: "countersign user delete")
            guard let erased = try await store.eraseUser(userID: user.id, ownedBy: nil, pseudonym: pseudonym, at: now, audit: event) else {
                throw CommandFailure("no user with email \(email)")
            }
            if output.json {
                return printJSON(
                    ErasedLine(
                        email: user.email, pseudonym: pseudonym, devicesRemoved: erased.devices, approvalsCancelled: erased.cancelled.count,
                        auditEvents: erased.auditEvents))
            }
            print(
                "erased \(user.email): \(erased.devices) device\(erased.devices == 1 ? "" : "s") removed, "
                    + "\(erased.cancelled.count) live request\(erased.cancelled.count == 1 ? "" : "s") cancelled")
            print("the audit trail names them \(pseudonym) in \(erased.auditEvents) event\(erased.auditEvents == 1 ? "" : "s")")
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List users.")
        @OptionGroup var database: DatabaseOptions
        @OptionGroup var output: JSONOption

        func run() async throws {
            let store = try await database.open()
            let users = try await store.users()
            if users.isEmpty && !output.json { print("no users") }
            for user in users {
                let devices = try await store.devices(userID: user.id)
                if output.json {
                    printJSON(
                        UserLine(
                            id: user.id, email: user.email, devices: devices.count, createdAt: user.createdAt,
                            silencedUntil: user.isSilenced(at: Date()) ? user.silencedUntil : nil))
                    continue
                }
                let silence = user.isSilenced(at: Date()) ? "  prompts silenced until \(user.silencedUntil!.formatted(.iso8601))" : ""
                print("\(user.id)  \(user.email)  devices: \(devices.count)  created \(user.createdAt.formatted(.iso8601))\(silence)")
            }
        }
    }
}

/// `user list --json`: one line a user.
struct UserLine: Encodable {
    let id: String
    let email: String
    let devices: Int
    let createdAt: Date
    let silencedUntil: Date?
}

/// `user delete --json`.
struct ErasedLine: Encodable {
    let email: String
    let pseudonym: String
    let devicesRemoved: Int
    let approvalsCancelled: Int
    let auditEvents: Int
}

/// `user bypass-codes --json`: the codes, shown once.
struct BypassCodesLine: Encodable {
    let email: String
    let codes: [String]
    let validUntil: Date
    let scope: String
}

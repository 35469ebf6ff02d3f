import ArgumentParser
import CountersignCore
import CountersignRuntime
import CountersignStore
import Foundation

struct UserCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "user",
        abstract: "Manage user accounts.",
        subcommands: [Add.self, Passwd.self, List.self, Unlock.self]
    )

    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Create a user; the password is read from standard input.")
        @Argument(help: "The user's email.") var email: String
        @OptionGroup var database: DatabaseOptions
        @OptionGroup var bcrypt: BcryptOption

        func run() async throws {
            let email = User.normalize(email: email)
            guard email.contains("@") else { throw ValidationError("\(email) is not an email address") }
            let store = try await database.open()
            let password = try readNewPassword()
            let hash = try await bcrypt.hasher().hash(password)
            do {
                let user = try await store.createUser(email: email, passwordHash: hash)
                print("created user \(user.email) (id \(user.id))")
            } catch AccountError.emailTaken {
                throw ValidationError("a user with email \(email) already exists")
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
            guard let user = try await store.user(email: email) else { throw ValidationError("no user with email \(email)") }
            let password = try readNewPassword()
            try await store.setPassword(userID: user.id, passwordHash: try await bcrypt.hasher().hash(password))
            print("password changed for \(user.email)")
        }
    }

    struct Unlock: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "End the prompt silence a fraud report put on a user.")
        @Argument(help: "The user's email.") var email: String
        @OptionGroup var database: DatabaseOptions

        func run() async throws {
            let store = try await database.open()
            guard let user = try await store.user(email: email) else { throw ValidationError("no user with email \(email)") }
            try await store.silencePrompts(userID: user.id, until: nil)
            try await store.append([AuditEvent(kind: .userUnlocked, userID: user.id, detail: "countersign user unlock")])
            print(user.isSilenced(at: Date()) ? "unlocked \(user.email): prompts resume" : "\(user.email) was not silenced; nothing to do")
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List users.")
        @OptionGroup var database: DatabaseOptions

        func run() async throws {
            let store = try await database.open()
            let users = try await store.users()
            if users.isEmpty { print("no users") }
            for user in users {
                let devices = try await store.devices(userID: user.id)
                let silence = user.isSilenced(at: Date()) ? "  prompts silenced until \(user.silencedUntil!.formatted(.iso8601))" : ""
                print("\(user.id)  \(user.email)  devices: \(devices.count)  created \(user.createdAt.formatted(.iso8601))\(silence)")
            }
        }
    }
}

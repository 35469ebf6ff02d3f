import ArgumentParser
import CountersignCore
import CountersignStore
import Foundation

struct DeviceCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "device",
        abstract: "Manage trusted devices.",
        subcommands: [List.self, Revoke.self, DeviceSimulateCommand.self]
    )

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List a user's trusted devices.")
        @Argument(help: "The user's email.") var email: String
        @OptionGroup var database: DatabaseOptions

        func run() async throws {
            let store = try await database.open()
            guard let user = try await store.user(email: email) else { throw CommandFailure("no user with email \(email)") }
            let devices = try await store.devices(userID: user.id)
            if devices.isEmpty { print("no devices for \(user.email)") }
            for device in devices {
                let push =
                    device.push.map { device.pushEnabled ? "push \($0.described)" : "push off (\($0.provider.rawValue) token rejected)" }
                    ?? "pull only"
                let key = device.publicKey.map { "key \($0.thumbprint)" } ?? "no key"
                // Names came from phones: escaped (LogText), so none can reorder or break the line.
                print(
                    "\(device.id)  \(LogText.escaped(device.name))  \(LogText.escaped(device.platform))  \(push)  \(key)  since \(device.createdAt.formatted(.iso8601))"
                )
            }
        }
    }

    struct Revoke: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Revoke a trusted device: its API key stops working.")
        @Argument(help: "The device id (see `device list`); an older one that begins with `-` goes after `--`.")
        var deviceID: String
        @OptionGroup var database: DatabaseOptions

        func run() async throws {
            let store = try await database.open()
            guard try await store.deleteDevice(id: deviceID) else { throw CommandFailure("no device with id \(deviceID)") }
            print("revoked device \(deviceID)")
        }
    }
}

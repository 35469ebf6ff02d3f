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
        @OptionGroup var output: JSONOption

        func run() async throws {
            let store = try await database.open()
            guard let user = try await store.user(email: email) else { throw CommandFailure("no user with email \(email)") }
            let devices = try await store.devices(userID: user.id)
            if devices.isEmpty && !output.json { print("no devices for \(user.email)") }
            for device in devices {
                if output.json {
                    printJSON(
                        DeviceLine(
                            id: device.id, name: device.name, platform: device.platform, provider: device.push?.provider.rawValue,
                            pushEnabled: device.push != nil && device.pushEnabled, keyThumbprint: device.publicKey?.thumbprint,
                            createdAt: device.createdAt))
                    continue
                }
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

/// `device list --json`: one line a device (its push address is not shown, only its provider).
struct DeviceLine: Encodable {
    let id: String
    let name: String
    let platform: String
    let provider: String?
    let pushEnabled: Bool
    let keyThumbprint: String?
    let createdAt: Date
}

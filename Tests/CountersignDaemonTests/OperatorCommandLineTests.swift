import CountersignRuntime
import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The command line as an operator on a systemd host meets it: admin commands
/// run by root act as the service's user, and every command's help says the
/// same things the same way.
@Suite struct OperatorCommandLineTests {
    /// The service's user here: `nobody`, as a stand-in for the unit's `User=countersign`.
    static let serviceUID: UInt32 = 65534

    /// What an option's value may be called: a unit or a kind of value, never the flag's name again (`<request-ttl>`).
    static let valueNames: Set<String> = [
        "seconds", "days", "count", "duration", "cost", "file", "folder", "file-or-url", "url", "host:port", "ip-or-cidr", "name=count/seconds",
        "email", "address", "user", "name", "id", "id-or-reference", "bundle-id", "code", "token", "kind", "level", "template", "scheme",
    ]

    static func owners(_ folder: URL) throws -> [String: UInt32] {
        var owners: [String: UInt32] = [:]
        for name in try FileManager.default.contentsOfDirectory(atPath: folder.path) {
            let attributes = try FileManager.default.attributesOfItem(atPath: folder.appendingPathComponent(name).path)
            owners[name] = (attributes[.ownerAccountID] as? NSNumber)?.uint32Value
        }
        return owners
    }

    /// A command a test runs in-process on such a folder refuses to change user (it would change the
    /// whole test process's, for good) and says to run the binary; the process is still root after.
    @Test(.enabled(if: geteuid() == 0, "needs root: only root changes user"))
    func aCommandRunInProcessNeverChangesTheTestProcesssUser() async throws {
        try await withTemporaryDirectory("countersign-in-process-user") { root in
            let folder = root.appendingPathComponent("countersign")
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            try FileManager.default.setAttributes(
                [.ownerAccountID: Self.serviceUID, .groupOwnerAccountID: Self.serviceUID, .posixPermissions: 0o700], ofItemAtPath: folder.path)
            let (status, output) = await CLI.run([
                "integration", "add", "acme", "--database", folder.appendingPathComponent("countersign.sqlite").path,
            ])
            #expect(status != 0)
            #expect(output.contains("does not change its user") && output.contains("run the binary"), "\(output)")
            #expect(geteuid() == 0 && getuid() == 0)
        }
    }

    /// Root runs the admin commands against the state directory of the unit's `User=` (before the first start, and
    /// after): every file they leave belongs to that user, who can go on writing the database.
    @Test(.enabled(if: geteuid() == 0, "needs root: it runs the commands as an operator's sudo does"))
    func adminCommandsRunByRootLeaveNoFileTheServiceCannotWrite() async throws {
        try await withTemporaryDirectory("countersign-service-user") { root in
            let folder = root.appendingPathComponent("countersign")
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            try FileManager.default.setAttributes(
                [.ownerAccountID: Self.serviceUID, .groupOwnerAccountID: Self.serviceUID, .posixPermissions: 0o700], ofItemAtPath: folder.path)
            let database = folder.appendingPathComponent("countersign.sqlite").path
            let binary = DaemonProcessTests.binary.path
            func asRoot(_ arguments: [String], input: String? = nil) async throws -> String {
                let (status, output) = try await onOwnThread { try runToEnd(binary, arguments + ["--database", database], input: input) }
                #expect(status == 0, "\(arguments): \(output)")
                return output
            }
            // The first user before the first start: the command makes the database, as the folder's owner.
            _ = try await asRoot(["user", "add", "ana@example.com", "--bcrypt-cost", "4"], input: "correct horse battery\n")
            _ = try await asRoot(["integration", "add", "acme"])
            #expect(try await asRoot(["user", "list"]).contains("ana@example.com"))
            // Found through a config file, as the package's commands find it.
            let config = root.appendingPathComponent("countersign.json")
            try Data(#"{"database": "\#(database)"}"#.utf8).write(to: config)
            let (listed, listing) = try await onOwnThread { try runToEnd(binary, ["integration", "list", "--config", config.path]) }
            #expect(listed == 0 && listing.contains("acme"), "\(listing)")
            _ = try await asRoot(["migrate", "--status"])
            _ = try await asRoot(["audit"])
            #expect(try Self.owners(folder)["countersign.sqlite"] == Self.serviceUID)
            for (name, owner) in try Self.owners(folder) {
                #expect(owner == Self.serviceUID, "\(name) belongs to uid \(owner), not the service's user")
            }
            // The service's own user writes the database root's commands touched.
            let (status, output) = try await onOwnThread {
                try runToEnd(
                    "/usr/bin/setpriv",
                    [
                        "--reuid=\(Self.serviceUID)", "--regid=\(Self.serviceUID)", "--clear-groups", binary, "user", "add", "bo@example.com",
                        "--bcrypt-cost", "4", "--database", database,
                    ],
                    input: "staple orbit lantern\n")
            }
            #expect(status == 0, "\(output)")
            #expect(try await asRoot(["user", "list"]).contains("bo@example.com"))
        }
    }

    /// One help style in every command: a value name that says what to give (never the flag's own name again), defaults
    /// written once and as the parser writes them, `(default: …)`, and every setting's environment variable and config key.
    @Test func everyOptionNamesItsValueItsDefaultAndWhereElseItIsSet() async throws {
        let (status, output) = try await DaemonProcessTests.command(["--experimental-dump-help"])
        #expect(status == 0, "\(output)")
        let tool = try #require(try JSONSerialization.jsonObject(with: Data(output.utf8)) as? [String: Any])
        let settings = Dictionary(uniqueKeysWithValues: Settings.all.map(\.info).map { ($0.longName, $0) })
        var serveSettings: Set<String> = []
        var optionsSeen = 0

        func walk(_ command: [String: Any], path: String) {
            let name = path.isEmpty ? "countersign" : path
            for argument in command["arguments"] as? [[String: Any]] ?? [] {
                guard argument["shouldDisplay"] as? Bool != false, let kind = argument["kind"] as? String, kind != "positional" else { continue }
                let names = argument["names"] as? [[String: Any]] ?? []
                guard let long = names.first(where: { $0["kind"] as? String == "long" })?["name"] as? String,
                    !["help", "version", "experimental-dump-help", "generate-completion-script"].contains(long)
                else { continue }
                let abstract = argument["abstract"] as? String ?? ""
                #expect(!abstract.isEmpty, "\(name) --\(long) has no help")
                #expect(abstract.firstMatch(of: /\(default [^:]/) == nil, "\(name) --\(long): a default not written as (default: …): \(abstract)")
                if argument["defaultValue"] != nil {
                    #expect(!abstract.contains("default"), "\(name) --\(long) says its default twice: \(abstract)")
                }
                if kind == "option" {
                    optionsSeen += 1
                    let value = argument["valueName"] as? String ?? ""
                    #expect(
                        Self.valueNames.contains(value) || value.contains("|"), "\(name) --\(long) <\(value)>: not a unit or kind of value")
                }
                // The demo's own throw-away daemon hashes with a cost of its own, not the daemon's setting.
                if let setting = settings[long], !(path == "demo" && long == "bcrypt-cost") {
                    #expect(abstract.contains(setting.environment), "\(name) --\(long) does not name \(setting.environment)")
                    #expect(abstract.contains("config \(setting.fileKey)"), "\(name) --\(long) does not name its config key")
                }
                if path == "serve" {
                    serveSettings.insert(long)
                    #expect(long == "config" || argument["sectionTitle"] as? String != nil, "serve --\(long) is in no group")
                }
            }
            for sub in command["subcommands"] as? [[String: Any]] ?? [] {
                guard let subName = sub["commandName"] as? String, subName != "help" else { continue }
                walk(sub, path: path.isEmpty ? subName : "\(path) \(subName)")
            }
        }
        walk(try #require(tool["command"] as? [String: Any]), path: "")
        #expect(optionsSeen > 50)
        #expect(
            Set(settings.keys).subtracting(serveSettings).isEmpty, "settings serve does not take: \(Set(settings.keys).subtracting(serveSettings))")
    }
}

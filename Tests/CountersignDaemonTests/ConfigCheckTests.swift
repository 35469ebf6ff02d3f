import CountersignRuntime
import Foundation
import NIOCore
import NIOPosix
import TestSupport
import Testing

/// `countersign config check`: the configuration `serve` would start with, each value's source, secrets never shown,
/// and a bad file, value or key refused with serve's exit status (78) and line, before a restart finds it.
@Suite struct ConfigCheckTests {
    func folder() throws -> URL { try makeTemporaryFolder("countersign-config-check") }

    func write(_ text: String, _ name: String, in folder: URL) throws -> String {
        let path = folder.appendingPathComponent(name).path
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
        return path
    }

    @Test func aGoodConfigurationIsPrintedWithEachValuesSourceAndNoSecret() async throws {
        let folder = try folder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let key = try write(String(repeating: "k", count: 48), "secret.key", in: folder)
        let config = try write(
            """
            {
              // The database's password is in its URL: never printed.
              "database": "postgres://ana:hunter2-secret@127.0.0.1:5432/countersign",
              "secretKeyFile": "\(key)",
              "requestTTL": 90,
              "smtp": {"url": "smtp://127.0.0.1:2525", "from": "Example <noreply@example.com>", "tls": "none"},
            }
            """, "countersign.json", in: folder)
        let (status, output) = try await DaemonProcessTests.command(
            ["config", "check", "--config", config, "--listen", "127.0.0.1:0", "--metrics-listen", "off", "--completion-window", "30"])
        #expect(status == 0, "\(output)")
        #expect(output.contains("config file: \(config)"))
        #expect(output.contains("requestTTL = 90  (\(config): requestTTL)"))
        #expect(output.contains("completionWindow = 30  (--completion-window)"))
        #expect(output.contains("numberMatching = required  (default)"))
        #expect(output.contains("database = postgres://ana:REDACTED@127.0.0.1:5432/countersign"))
        #expect(!output.contains("hunter2"))
        #expect(output.contains("secret key: \(key)"))
        #expect(output.contains("✓ serve would start with this configuration"))

        // The same as one JSON object, for scripts.
        let (jsonStatus, json) = try await DaemonProcessTests.command(
            ["config", "check", "--config", config, "--listen", "127.0.0.1:0", "--metrics-listen", "off", "--json"])
        #expect(jsonStatus == 0, "\(json)")
        let report = try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any])
        let settings = try #require(report["settings"] as? [[String: String]])
        #expect(settings.count == Settings.all.count)
        #expect(settings.contains { $0["key"] == "requestTTL" && $0["value"] == "90" && $0["source"] == "\(config): requestTTL" })
        #expect(!json.contains("hunter2"))
    }

    @Test func theEnvironmentIsReadAsServeReadsIt() async throws {
        let (status, output) = try await DaemonProcessTests.command(
            ["config", "check", "--listen", "127.0.0.1:0", "--metrics-listen", "off", "--database", "/nonexistent/countersign.sqlite"],
            environment: ["COUNTERSIGN_IDLE_TIMEOUT": "20", "PATH": "/usr/bin:/bin"])
        #expect(status == 0, "\(output)")
        #expect(output.contains("idleTimeout = 20  (COUNTERSIGN_IDLE_TIMEOUT)"))
    }

    /// Each kind of bad configuration: exit 78 and serve's one line, naming the setting, its source and what it expects.
    @Test(arguments: [
        ("{\"requestTTL\": \"7x\"}", "requestTTL: expected whole seconds"),
        ("{\"requestTTl\": 60}", "unknown key \"requestTTl\""),
        ("{\"listen\": ", "is not a JSON object"),
        ("{\"secretKeyFile\": \"SHORT\"}", "SHORT"),
        ("{\"fcm\": {\"serviceAccountFile\": \"/nonexistent/sa.json\"}}", "/nonexistent/sa.json"),
        ("{\"apns\": {\"keyFile\": \"/nonexistent/key.p8\"}}", "--apns-key-id"),
        ("{\"apns\": {\"keyFile\": \"SHORT\", \"keyID\": \"ABCDE12345\", \"teamID\": \"TEAM123456\"}}", "the APNs key SHORT"),
        // A named key must exist: serve creates only the default one.
        ("{\"secretKeyFile\": \"/nonexistent/secret.key\"}", "no secret key at /nonexistent/secret.key"),
        ("{\"smtp\": {\"url\": \"smtp://127.0.0.1:2525\", \"from\": \"a@example.com\", \"tls\": \"none\", \"caFile\": \"SHORT\"}}", "SHORT"),
    ])
    func aBadConfigurationIsRefusedAsServeWouldRefuseIt(file: String, says: String) async throws {
        let folder = try folder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let short = try write("too short", "short.key", in: folder)
        let config = try write(file.replacingOccurrences(of: "SHORT", with: short), "countersign.json", in: folder)
        let (status, output) = try await DaemonProcessTests.command(
            ["config", "check", "--config", config, "--listen", "127.0.0.1:0", "--metrics-listen", "off", "--database", folder.path + "/db.sqlite"])
        #expect(status == 78, "\(output)")
        #expect(output.contains(says.replacingOccurrences(of: "SHORT", with: short)), "\(output)")
        #expect(!output.contains("✓"))
    }

    /// What serve takes as it is: an empty service-account file (push off, as the package installs it), and the request
    /// timeout's older name when the request timeout is set nowhere.
    @Test func anEmptyServiceAccountIsPushOffAndTheOlderTimeoutNameIsShownInForce() async throws {
        let folder = try folder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let account = try write("\n", "fcm-service-account.json", in: folder)
        let (status, output) = try await DaemonProcessTests.command(
            [
                "config", "check", "--fcm-service-account", account, "--header-timeout", "12", "--listen", "127.0.0.1:0", "--metrics-listen", "off",
                "--database", folder.path + "/db.sqlite",
            ])
        #expect(status == 0, "\(output)")
        #expect(output.contains("FCM service account: \(account) is empty: FCM push off"))
        #expect(output.contains("requestTimeout = 12  (--header-timeout, its older name)"))
    }

    /// An address the daemon holds now is said (the check runs before a restart), one that cannot be bound is refused.
    @Test func anAddressInUseIsSaidAndOneNotOnThisHostIsRefused() async throws {
        let group = MultiThreadedEventLoopGroup.singleton
        let holder = try await ServerBootstrap(group: group).bind(host: "127.0.0.1", port: 0).get()
        defer { holder.close(promise: nil) }
        let port = try #require(holder.localAddress?.port)
        let folder = try folder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let database = folder.path + "/db.sqlite"
        let (status, output) = try await DaemonProcessTests.command(
            ["config", "check", "--listen", "127.0.0.1:\(port)", "--metrics-listen", "off", "--database", database])
        #expect(status == 0, "\(output)")
        #expect(output.contains("note: 127.0.0.1:\(port) (--listen) is in use now"))
        let (refused, line) = try await DaemonProcessTests.command(
            ["config", "check", "--listen", "192.0.2.1:8080", "--metrics-listen", "off", "--database", database])
        #expect(refused == 78, "\(line)")
        #expect(line.contains("cannot listen on 192.0.2.1:8080 (--listen)"))
    }
}

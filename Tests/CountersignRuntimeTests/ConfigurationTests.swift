import CountersignCore
import CountersignHTTP
import CountersignPush
import CountersignRuntime
import Foundation
import Logging
import TestSupport
import Testing

@Suite struct ConfigurationTests {
    func writeConfig(_ json: String) throws -> (TemporaryFolder, String) {
        let folder = try TemporaryFolder()
        let path = folder.url.appendingPathComponent("countersign.json").path
        try Data(json.utf8).write(to: URL(fileURLWithPath: path))
        return (folder, path)
    }

    @Test func defaultsMatchTheDocumentation() throws {
        let configuration = try ConfigurationLoader(flags: [:], environment: [:], configFile: nil).serveConfiguration()
        #expect(configuration.host == "127.0.0.1")
        #expect(configuration.port == 8080)
        #expect(configuration.databasePath == "./countersign.sqlite")
        #expect(configuration.broker == BrokerConfiguration(requestTTL: 60, completionWindow: 120, numberMatching: true))
        #expect(configuration.bcryptCost == 12)
        #expect(configuration.fraudSilence == 3600)
        #expect(configuration.retention == 400 * 86400)
        // http-api.md, "Connections and waits".
        #expect(configuration.idleTimeout == .seconds(75))
        #expect(configuration.requestTimeout == .seconds(30))
        #expect(configuration.longPollsPerAddress == 1000)
        #expect(configuration.longPollsTotal == 100_000)
        // trust.md: devices per user, connections per address, /metrics on loopback only.
        #expect(configuration.maxDevicesPerUser == 20)
        #expect(configuration.connectionsPerAddress == 64)
        #expect(configuration.metricsListen == ListenAddress(host: "127.0.0.1", port: 9464))
        let off = try ConfigurationLoader(flags: ["--metrics-listen": "off"], environment: [:], configFile: nil).serveConfiguration()
        #expect(off.metricsListen == nil)
        let systemd = try ConfigurationLoader(flags: [:], environment: ["STATE_DIRECTORY": "/var/lib/countersign"], configFile: nil)
        #expect(try systemd.databasePath() == "/var/lib/countersign/countersign.sqlite")
    }

    /// The installed config file explains each setting in comments: JSON with JSON5's comments and trailing commas
    /// reads as the same settings; text that is not an object is still refused, naming the file.
    @Test func theConfigFileMayCarryCommentsAndTrailingCommas() throws {
        let (folder, path) = try writeConfig(
            """
            // the API
            {
              "listen": "127.0.0.1:9099", /* the port */
              "requestTTL": 45,
              "fcm": {"endpoint": "https://fcm.example.net",},
              "rateLimits": {"statusPollsPerIP": {"count": 7, "window": 2},},
            }
            """)
        defer { folder.remove() }
        let configuration = try ConfigurationLoader(flags: [:], environment: [:], configFile: path).serveConfiguration()
        #expect(configuration.port == 9099)
        #expect(configuration.broker.requestTTL == 45)
        #expect(configuration.rateLimits[.statusPollsPerIP] == RateLimit(count: 7, window: 2))
        #expect(try ConfigurationLoader(flags: [:], environment: [:], configFile: path).pushConfiguration().endpoint == "https://fcm.example.net")
        try Data("// only a comment\n[1, 2]".utf8).write(to: URL(fileURLWithPath: path))
        #expect(throws: ConfigurationError.self) { _ = try ConfigurationLoader(flags: [:], environment: [:], configFile: path) }
    }

    /// The config file the package installs (systemd/countersign.json) loads, and changes nothing but the database's place
    /// and the local proxy it trusts: every setting it shows commented out is at its default.
    @Test func theInstalledConfigFileLoadsAsTheDefaults() throws {
        let path = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("systemd/countersign.json").path
        let installed = try ConfigurationLoader(flags: [:], environment: [:], configFile: path).serveConfiguration()
        var defaults = try ConfigurationLoader(flags: [:], environment: [:], configFile: nil).serveConfiguration()
        #expect(installed.databasePath == "/var/lib/countersign/countersign.sqlite")
        #expect(installed.trustedProxies.map(\.description) == ["127.0.0.1", "::1"])
        defaults.databasePath = installed.databasePath
        defaults.database = installed.database
        defaults.trustedProxies = installed.trustedProxies
        #expect(installed == defaults)
    }

    /// fcm-http-v1.md: every command finds the service account the same way (they all read ``ConfigurationLoader/pushConfiguration()``).
    @Test func theServiceAccountComesFromTheFlagThenTheEnvironmentThenTheFileThenTheCredential() throws {
        let (folder, path) = try writeConfig(#"{"fcm": {"serviceAccountFile": "/from/file.json"}}"#)
        defer { folder.remove() }
        let credentials = folder.url.appendingPathComponent("credentials")
        try FileManager.default.createDirectory(at: credentials, withIntermediateDirectories: true)
        let credential = credentials.appendingPathComponent(PushConfiguration.credentialName).path
        try Data("{}".utf8).write(to: URL(fileURLWithPath: credential))
        let flag = [Settings.table.fcmServiceAccount.flag: "/from/flag.json"]
        let variable = [Settings.table.fcmServiceAccount.environment: "/from/environment.json", "CREDENTIALS_DIRECTORY": credentials.path]
        func found(_ flags: [String: String], _ environment: [String: String], _ file: String?) throws -> String? {
            try ConfigurationLoader(flags: flags, environment: environment, configFile: file).pushConfiguration().serviceAccountFile
        }
        #expect(try found(flag, variable, path) == "/from/flag.json")
        #expect(try found([:], variable, path) == "/from/environment.json")
        #expect(try found([:], ["CREDENTIALS_DIRECTORY": credentials.path], path) == "/from/file.json")
        #expect(try found([:], ["CREDENTIALS_DIRECTORY": credentials.path], nil) == credential)
        // Without any of them, push is off.
        #expect(try found([:], [:], nil) == nil)
        #expect(try found([:], ["CREDENTIALS_DIRECTORY": folder.url.path], nil) == nil)
    }

    @Test func flagBeatsEnvironmentBeatsFileBeatsDefault() throws {
        let (folder, path) = try writeConfig(#"{"requestTTL": 30, "completionWindow": 90, "numberMatching": "off", "listen": "0.0.0.0:9000"}"#)
        defer { folder.remove() }
        let loader = try ConfigurationLoader(
            flags: ["--request-ttl": "10"],
            environment: ["COUNTERSIGN_REQUEST_TTL": "20", "COUNTERSIGN_COMPLETION_WINDOW": "80"],
            configFile: path
        )
        let configuration = try loader.serveConfiguration()
        #expect(configuration.broker.requestTTL == 10)
        #expect(configuration.broker.completionWindow == 80)
        #expect(configuration.broker.numberMatching == false)
        #expect(configuration.host == "0.0.0.0")
        #expect(configuration.port == 9000)
        #expect(configuration.bcryptCost == 12)
    }

    @Test func aBadValueIsOneLineNamingItsSource() throws {
        #expect(throws: ConfigurationError("invalid value \"abc\" for COUNTERSIGN_REQUEST_TTL: expected whole seconds from 1 to 86400")) {
            try ConfigurationLoader(flags: [:], environment: ["COUNTERSIGN_REQUEST_TTL": "abc"], configFile: nil).serveConfiguration()
        }
        #expect(throws: ConfigurationError.self) {
            try ConfigurationLoader(flags: ["--bcrypt-cost": "3"], environment: [:], configFile: nil).serveConfiguration()
        }
        #expect(throws: ConfigurationError("invalid value \"localhost\" for --listen: expected HOST:PORT, e.g. 127.0.0.1:8080")) {
            try ConfigurationLoader(flags: ["--listen": "localhost"], environment: ["COUNTERSIGN_LISTEN": "127.0.0.1:1"], configFile: nil)
                .serveConfiguration()
        }
        // The source is the one whose value was read: the file's key when neither flag nor environment sets it.
        let (zeroFolder, zeroPath) = try writeConfig(#"{"requestTTL": 0, "fcm": {"endpoint": "ftp://x"}}"#)
        defer { zeroFolder.remove() }
        #expect(throws: ConfigurationError("invalid value \"0\" for \(zeroPath): requestTTL: expected whole seconds from 1 to 86400")) {
            try ConfigurationLoader(flags: [:], environment: [:], configFile: zeroPath).serveConfiguration()
        }
        #expect(
            throws: ConfigurationError(
                "invalid value \"ftp://x\" for \(zeroPath): fcm.endpoint: expected an http(s) URL such as https://fcm.googleapis.com")
        ) {
            try ConfigurationLoader(flags: ["--request-ttl": "5"], environment: [:], configFile: zeroPath).serveConfiguration()
        }
        // A value that may hold a password (a database URL) is not repeated.
        #expect(throws: ConfigurationError("invalid value for COUNTERSIGN_DATABASE: expected a file path or a postgres:// URL")) {
            try ConfigurationLoader(flags: [:], environment: ["COUNTERSIGN_DATABASE": " "], configFile: nil).serveConfiguration()
        }
        let (listFolder, listPath) = try writeConfig(#"{"listen": ["127.0.0.1:8080"]}"#)
        defer { listFolder.remove() }
        #expect(throws: ConfigurationError("\(listPath): listen must be a string, a number or a boolean")) {
            try ConfigurationLoader(flags: [:], environment: [:], configFile: listPath).serveConfiguration()
        }
        // Said when that setting is read: what does not read it (an operator command's cost) still works, and a flag overrides it.
        #expect(try ConfigurationLoader(flags: [:], environment: [:], configFile: listPath).bcryptCost() == 12)
        #expect(try ConfigurationLoader(flags: ["--listen": "127.0.0.1:9"], environment: [:], configFile: listPath).serveConfiguration().port == 9)
        let (folder, path) = try writeConfig(#"{"requestTtl": 30}"#)
        defer { folder.remove() }
        do {
            _ = try ConfigurationLoader(flags: [:], environment: [:], configFile: path)
            Issue.record("an unknown key was accepted")
        } catch let error as ConfigurationError {
            #expect(error.description.contains("requestTtl"))
            #expect(!error.description.contains("\n"))
        }
    }

    /// device-keys.md's policy: `deviceKeys` in the file, `COUNTERSIGN_DEVICE_KEYS`, `--device-keys`, in that rising order.
    @Test func theDeviceKeyPolicyComesFromFlagEnvironmentOrFile() throws {
        let (folder, path) = try writeConfig(#"{"deviceKeys": "required"}"#)
        defer { folder.remove() }
        func policy(_ flags: [String: String], _ environment: [String: String], _ file: String?) throws -> DeviceKeyPolicy {
            try ConfigurationLoader(flags: flags, environment: environment, configFile: file).serveConfiguration().deviceKeys
        }
        #expect(try policy([:], [:], nil) == .optional)
        #expect(try policy([:], [:], path) == .required)
        #expect(try policy([:], ["COUNTERSIGN_DEVICE_KEYS": "OFF"], path) == .off)
        #expect(try policy(["--device-keys": "optional"], ["COUNTERSIGN_DEVICE_KEYS": "off"], path) == .optional)
        #expect(throws: ConfigurationError("invalid value \"sometimes\" for COUNTERSIGN_DEVICE_KEYS: expected off, optional or required")) {
            try policy([:], ["COUNTERSIGN_DEVICE_KEYS": "sometimes"], nil)
        }
    }

    @Test func rateLimitsComeFromFileEnvironmentAndRepeatedFlags() throws {
        let (folder, path) = try writeConfig(
            #"{"rateLimits": {"resetInitiatePerEmail": {"count": 7, "window": 600}, "statusPollsPerIP": {"count": 9, "window": 2}}}"#)
        defer { folder.remove() }
        let configuration = try ConfigurationLoader(
            flags: [:],
            lists: ["--rate-limit": ["statusPollsPerIP=100/1", "respondPerDevice=2/30"]],
            environment: ["COUNTERSIGN_RATE_LIMITS": "statusPollsPerIP=20/1,loginFailuresPerIP=4/60"],
            configFile: path
        ).serveConfiguration()
        #expect(configuration.rateLimits[.resetInitiatePerEmail] == RateLimit(count: 7, window: 600))
        #expect(configuration.rateLimits[.statusPollsPerIP] == RateLimit(count: 100, window: 1))
        #expect(configuration.rateLimits[.respondPerDevice] == RateLimit(count: 2, window: 30))
        #expect(configuration.rateLimits[.loginFailuresPerIP] == RateLimit(count: 4, window: 60))
        #expect(configuration.rateLimits[.resetInitiatePerIP] == nil)

        #expect(throws: ConfigurationError.self) {
            try ConfigurationLoader(flags: [:], lists: ["--rate-limit": ["nope=1/1"]], environment: [:], configFile: nil).serveConfiguration()
        }
        #expect(throws: ConfigurationError.self) {
            try ConfigurationLoader(flags: [:], lists: ["--rate-limit": ["statusPollsPerIP=0/1"]], environment: [:], configFile: nil)
                .serveConfiguration()
        }
    }

    @Test func trustedProxiesParseAsCIDR() throws {
        let configuration = try ConfigurationLoader(
            flags: [:], lists: ["--trusted-proxy": ["10.0.0.0/8", "::1", "2001:db8::/32"]], environment: [:], configFile: nil
        ).serveConfiguration()
        #expect(configuration.trustedProxies.map(\.description) == ["10.0.0.0/8", "::1", "2001:db8::/32"])
        #expect(throws: ConfigurationError.self) {
            try ConfigurationLoader(flags: [:], lists: ["--trusted-proxy": ["10.0.0.0/33"]], environment: [:], configFile: nil)
                .serveConfiguration()
        }
    }
}

@Suite struct ClientAddressTests {
    let proxies = [IPNetwork("10.0.0.0/8")!, IPNetwork("127.0.0.1")!]

    @Test func anUntrustedPeerIsTheClientWhateverItForwards() {
        #expect(ClientAddress.resolve(peer: "203.0.113.9", forwardedFor: ["198.51.100.1"], trusted: proxies) == "203.0.113.9")
        #expect(ClientAddress.resolve(peer: "127.0.0.1", forwardedFor: ["198.51.100.1"], trusted: []) == "127.0.0.1")
    }

    @Test func behindTrustedProxiesTheRightMostUntrustedAddressWins() {
        #expect(ClientAddress.resolve(peer: "127.0.0.1", forwardedFor: ["198.51.100.1"], trusted: proxies) == "198.51.100.1")
        // A client cannot choose its address by prepending a forged hop.
        #expect(
            ClientAddress.resolve(peer: "10.1.2.3", forwardedFor: ["6.6.6.6, 198.51.100.1", "10.9.9.9"], trusted: proxies) == "198.51.100.1")
        #expect(ClientAddress.resolve(peer: "10.1.2.3", forwardedFor: ["10.2.2.2"], trusted: proxies) == "10.2.2.2")
        #expect(ClientAddress.resolve(peer: "10.1.2.3", forwardedFor: [], trusted: proxies) == "10.1.2.3")
        #expect(ClientAddress.resolve(peer: "10.1.2.3", forwardedFor: ["not-an-ip"], trusted: proxies) == "10.1.2.3")
    }

    @Test func networksMatchByPrefix() throws {
        let network = try #require(IPNetwork("192.168.0.0/16"))
        #expect(network.contains(try #require(IPNetworkTestBytes.v4("192.168.44.1"))))
        #expect(!network.contains(try #require(IPNetworkTestBytes.v4("192.169.0.1"))))
        #expect(IPNetwork("not/an/ip") == nil)
        #expect(ClientAddress.resolve(peer: "::ffff:127.0.0.1", forwardedFor: ["2001:db8::1"], trusted: proxies) == "2001:db8::1")
    }
}

enum IPNetworkTestBytes {
    static func v4(_ text: String) -> [UInt8]? {
        let parts = text.split(separator: ".").compactMap { UInt8($0) }
        return parts.count == 4 ? parts : nil
    }
}

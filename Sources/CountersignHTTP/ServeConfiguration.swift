import CountersignCore
import Foundation
import Logging

/// Everything `countersign serve` needs, after flags, environment and file are merged.
public struct ServeConfiguration: Sendable, Equatable {
    public var host = "127.0.0.1"
    public var port = 8080
    public var databasePath: String
    public var broker = BrokerConfiguration()
    public var bcryptCost = 12
    public var logLevel: Logger.Level = .info

    public init(databasePath: String) {
        self.databasePath = databasePath
    }

    /// `$STATE_DIRECTORY/countersign.sqlite` under systemd, else `./countersign.sqlite`.
    public static func defaultDatabasePath(environment: [String: String]) -> String {
        if let state = environment["STATE_DIRECTORY"]?.split(separator: ":").first, !state.isEmpty {
            return String(state) + "/countersign.sqlite"
        }
        return "./countersign.sqlite"
    }
}

/// A bad setting: one line naming the setting, where it came from and what is expected.
public struct ConfigurationError: Error, CustomStringConvertible, Equatable {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// Merges settings with the precedence flag > environment (`COUNTERSIGN_*`) > config file > default.
public struct ConfigurationLoader {
    /// One setting: its flag, its environment variable and its config-file key.
    public struct Setting: Sendable {
        public var flag: String
        public var environment: String
        public var fileKey: String
    }

    public static let listen = Setting(flag: "--listen", environment: "COUNTERSIGN_LISTEN", fileKey: "listen")
    public static let database = Setting(flag: "--database", environment: "COUNTERSIGN_DATABASE", fileKey: "database")
    public static let requestTTL = Setting(flag: "--request-ttl", environment: "COUNTERSIGN_REQUEST_TTL", fileKey: "requestTTL")
    public static let completionWindow = Setting(
        flag: "--completion-window", environment: "COUNTERSIGN_COMPLETION_WINDOW", fileKey: "completionWindow")
    public static let numberMatching = Setting(
        flag: "--number-matching", environment: "COUNTERSIGN_NUMBER_MATCHING", fileKey: "numberMatching")
    public static let bcryptCost = Setting(flag: "--bcrypt-cost", environment: "COUNTERSIGN_BCRYPT_COST", fileKey: "bcryptCost")
    public static let logLevel = Setting(flag: "--log-level", environment: "COUNTERSIGN_LOG_LEVEL", fileKey: "logLevel")
    static let all = [listen, database, requestTTL, completionWindow, numberMatching, bcryptCost, logLevel]

    let flags: [String: String]
    let environment: [String: String]
    let file: [String: Any]
    let filePath: String?

    /// - Parameters:
    ///   - flags: values given on the command line, by flag name (`"--listen"`).
    ///   - configFile: the JSON config file, when given (flag, then `COUNTERSIGN_CONFIG`).
    public init(flags: [String: String], environment: [String: String], configFile: String?) throws {
        self.flags = flags
        self.environment = environment
        self.filePath = configFile ?? environment["COUNTERSIGN_CONFIG"]
        guard let filePath else {
            self.file = [:]
            return
        }
        guard let data = FileManager.default.contents(atPath: filePath) else {
            throw ConfigurationError("cannot read config file \(filePath)")
        }
        guard let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any] else {
            throw ConfigurationError("config file \(filePath) is not a JSON object")
        }
        let known = Set(Self.all.map(\.fileKey))
        if let unknown = object.keys.sorted().first(where: { !known.contains($0) }) {
            throw ConfigurationError(
                "config file \(filePath): unknown key \"\(unknown)\" (known: \(known.sorted().joined(separator: ", ")))")
        }
        self.file = object
    }

    /// The raw value of a setting and where it came from, or `nil` when unset.
    func raw(_ setting: Setting) -> (value: String, source: String)? {
        if let value = flags[setting.flag] { return (value, setting.flag) }
        if let value = environment[setting.environment] { return (value, setting.environment) }
        if let value = file[setting.fileKey] {
            let text = (value as? String) ?? ((value as? NSNumber)?.stringValue ?? "\(value)")
            return (text, "\(filePath ?? "config file"): \(setting.fileKey)")
        }
        return nil
    }

    func value<T>(_ setting: Setting, expected: String, parse: (String) -> T?) throws -> T? {
        guard let (raw, source) = raw(setting) else { return nil }
        guard let value = parse(raw.trimmingCharacters(in: .whitespaces)) else {
            throw ConfigurationError("invalid value \"\(raw)\" for \(source): expected \(expected)")
        }
        return value
    }

    public func databasePath() throws -> String {
        try value(Self.database, expected: "a file path", parse: { $0.isEmpty ? nil : $0 })
            ?? ServeConfiguration.defaultDatabasePath(environment: environment)
    }

    public func serveConfiguration() throws -> ServeConfiguration {
        var configuration = ServeConfiguration(databasePath: try databasePath())
        if let (host, port) = try value(Self.listen, expected: "HOST:PORT, e.g. 127.0.0.1:8080", parse: Self.parseListen) {
            configuration.host = host
            configuration.port = port
        }
        let seconds = "whole seconds from 1 to 86400"
        if let ttl = try value(Self.requestTTL, expected: seconds, parse: Self.parseSeconds) {
            configuration.broker.requestTTL = ttl
        }
        if let window = try value(Self.completionWindow, expected: seconds, parse: Self.parseSeconds) {
            configuration.broker.completionWindow = window
        }
        if let matching = try value(Self.numberMatching, expected: "required or off", parse: Self.parseNumberMatching) {
            configuration.broker.numberMatching = matching
        }
        let costs = BcryptPasswordHasher.costRange
        if let cost = try value(Self.bcryptCost, expected: "a whole number from \(costs.lowerBound) to \(costs.upperBound)", parse: {
            Int($0).flatMap { costs.contains($0) ? $0 : nil }
        }) {
            configuration.bcryptCost = cost
        }
        if let level = try value(Self.logLevel, expected: "trace, debug, info, notice, warning, error or critical", parse: {
            Logger.Level(rawValue: $0.lowercased())
        }) {
            configuration.logLevel = level
        }
        return configuration
    }

    static func parseListen(_ text: String) -> (String, Int)? {
        guard let colon = text.lastIndex(of: ":") else { return nil }
        var host = String(text[..<colon])
        if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        guard !host.isEmpty, let port = Int(text[text.index(after: colon)...]), (0...65535).contains(port) else { return nil }
        return (host, port)
    }

    static func parseSeconds(_ text: String) -> TimeInterval? {
        guard let seconds = Int(text), (1...86400).contains(seconds) else { return nil }
        return TimeInterval(seconds)
    }

    static func parseNumberMatching(_ text: String) -> Bool? {
        switch text.lowercased() {
        case "required", "on": true
        case "off": false
        default: nil
        }
    }
}

import ArgumentParser
import CountersignRuntime
import Foundation

/// One help style for every setting: what it sets, where else it may be set (its environment variable and config-file
/// key), its default last, written the way the parser writes the defaults it shows itself (`(default: 10)`), and a
/// value name that says what to give (`<seconds>`, `<host:port>`), not the flag again.
extension SettingInfo {
    var name: NameSpecification { .customLong(longName) }

    var argumentHelp: ArgumentHelp {
        ArgumentHelp("\(help) Also \(environment), config \(fileKey)." + (shownDefault.map { " (default: \($0))" } ?? ""), valueName: valueName)
    }

    var completion: CompletionKind? {
        switch valueName {
        case "file", "file-or-url": .file()
        case "folder": .directory
        default: nil
        }
    }
}

extension Option {
    /// `@Option(\.listen) var listen: String?`: the option of a setting, named and explained by its declaration.
    init<Parsed>(_ setting: KeyPath<Settings, Setting<Parsed>>) where Value == String? {
        let info = Settings.table[keyPath: setting].info
        self.init(name: info.name, help: info.argumentHelp, completion: info.completion)
    }

    /// A repeatable setting's option (`--trusted-proxy A --trusted-proxy B`).
    init<Parsed>(wrappedValue: [String], _ setting: KeyPath<Settings, Setting<Parsed>>) where Value == [String] {
        let info = Settings.table[keyPath: setting].info
        self.init(wrappedValue: wrappedValue, name: info.name, help: info.argumentHelp, completion: info.completion)
    }
}

extension Flag where Value == Bool {
    /// A setting that is a switch on the command line (`on` in the environment and the file).
    init<Parsed>(wrappedValue: Bool, _ setting: KeyPath<Settings, Setting<Parsed>>) {
        let info = Settings.table[keyPath: setting].info
        self.init(wrappedValue: wrappedValue, name: info.name, help: info.argumentHelp)
    }
}

/// The settings a command line gave, by flag, for ``ConfigurationLoader``.
struct GivenSettings {
    var values: [String: String] = [:]
    var lists: [String: [String]] = [:]

    /// Reads the settings' options of `groups`: each property named as its setting in ``Settings`` (`listen`).
    init(_ groups: any ParsableArguments...) {
        for group in groups {
            for child in Mirror(reflecting: group).children {
                guard let label = child.label, label.hasPrefix("_"), let setting = Settings.named[String(label.dropFirst())] else { continue }
                switch child.value {
                case let option as Option<String?>: values[setting.flag] = option.wrappedValue
                case let option as Option<[String]>: lists[setting.flag] = option.wrappedValue.isEmpty ? nil : option.wrappedValue
                case let flag as Flag<Bool>: values[setting.flag] = flag.wrappedValue ? "on" : nil
                default:
                    // An option group named as a setting (`database`) is not one; an option of another type would be lost.
                    let type = "\(type(of: child.value))"
                    precondition(
                        !type.hasPrefix("Option<") && !type.hasPrefix("Flag<"), "\(label): a setting's option is a String?, a [String] or a Bool")
                }
            }
        }
    }

    /// The settings as `command` finds them: these, the environment, and the config file every command finds the same
    /// way (``configFile(_:)``).
    func loader(config: String?) throws -> ConfigurationLoader {
        try ConfigurationLoader(flags: values, lists: lists, environment: ProcessInfo.processInfo.environment, configFile: configFile(config))
    }
}

/// The package's config file.
let installedConfigFile = "/etc/countersign/countersign.json"

/// The config file every command reads, `serve` and the operator's commands alike: `--config`, else
/// `COUNTERSIGN_CONFIG`, else the package's `/etc/countersign/countersign.json` when it exists.
func configFile(_ flag: String?) -> String? {
    flag ?? ProcessInfo.processInfo.environment["COUNTERSIGN_CONFIG"]
        ?? (FileManager.default.fileExists(atPath: installedConfigFile) ? installedConfigFile : nil)
}

/// Every command's `--config`.
let configHelp = ArgumentHelp(
    "The daemon's JSON config file; comments and trailing commas are allowed. Also COUNTERSIGN_CONFIG. (default: \(installedConfigFile) when it exists)",
    valueName: "file")

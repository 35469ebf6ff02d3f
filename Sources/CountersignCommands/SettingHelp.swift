import ArgumentParser
import CountersignRuntime

/// One help style for every setting: what it sets, where else it may be set
/// (its environment variable and config-file key), its default last, written
/// the way the parser writes the defaults it shows itself (`(default: 10)`),
/// and a value name that says what to give (`<seconds>`, `<host:port>`), not the flag again.
extension ConfigurationLoader.Setting {
    /// The flag's name for the parser.
    var name: NameSpecification { .customLong(longName) }

    func help(_ text: String, default value: String? = nil, value valueName: String) -> ArgumentHelp {
        ArgumentHelp(Self.helpText(text, environment: environment, fileKey: fileKey, default: value), valueName: valueName)
    }

    /// For a flag that takes no value.
    func help(_ text: String) -> ArgumentHelp {
        ArgumentHelp(Self.helpText(text, environment: environment, fileKey: fileKey, default: nil))
    }

    static func helpText(_ text: String, environment: String, fileKey: String, default value: String?) -> String {
        "\(text) Also \(environment), config \(fileKey)." + (value.map { " (default: \($0))" } ?? "")
    }
}

import ArgumentParser
import CountersignRuntime
import Testing

@testable import CountersignCommands

/// `serve`'s options name their settings (`@Option(\.listen) var listen`): each value given on the command line reaches
/// the loader under its own setting's flag, every setting of the table has its option, and a setting given on the
/// command line is not read from the environment or file.
@Suite struct SettingOptionsTests {
    @Test func everySettingGivenToServeReachesTheLoaderUnderItsOwnFlag() throws {
        var arguments: [String] = []
        var expected: [String: String] = [:]
        var expectedLists: [String: [String]] = [:]
        for (index, setting) in Settings.all.map(\.info).enumerated() {
            if setting.valueName == nil {
                arguments.append(setting.flag)
                expected[setting.flag] = "on"
            } else if setting.isList {
                arguments += [setting.flag, "first-\(index)", setting.flag, "second-\(index)"]
                expectedLists[setting.flag] = ["first-\(index)", "second-\(index)"]
            } else {
                arguments += [setting.flag, "value-\(index)"]
                expected[setting.flag] = "value-\(index)"
            }
        }
        let serve = try #require(try Countersign.parseAsRoot(["serve"] + arguments) as? Serve)
        let given = serve.settings.given
        #expect(given.values == expected)
        #expect(given.lists == expectedLists)
        // Nothing given, nothing read from the command line.
        let bare = try #require(try Countersign.parseAsRoot(["serve"]) as? Serve)
        #expect(bare.settings.given.values.isEmpty && bare.settings.given.lists.isEmpty)
    }

    /// The operator's commands take the same options, and the loader reads them: `--database` reaches `database()`.
    @Test func anOperatorCommandsSettingsReachTheLoader() async throws {
        let command = try #require(try Countersign.parseAsRoot(["user", "list", "--database", "/nonexistent/a.sqlite"]) as? UserCommand.List)
        let location = try command.database.loader().database()
        #expect(location == .sqlite(path: "/nonexistent/a.sqlite"))
    }
}

import CountersignRuntime
import Testing

/// The one table of settings (`Settings`): every name it gives is unique, and every default help shows is the
/// daemon's own.
@Suite struct SettingsTableTests {
    @Test func everyFlagVariableAndKeyNamesOneSetting() {
        let settings = Settings.all.map(\.info)
        #expect(settings.count == Settings.named.count)
        #expect(settings.count >= 53)
        for names in [settings.map(\.flag), settings.map(\.environment), settings.map(\.fileKey)] {
            #expect(Set(names).count == names.count, "\(names.sorted())")
        }
        for setting in settings {
            #expect(setting.flag.hasPrefix("--") && setting.environment.hasPrefix("COUNTERSIGN_"), "\(setting.flag)")
        }
        #expect(Set(settings.map(\.group)) == Set(SettingInfo.Group.allCases))
    }

    /// A default written in help is the one the configuration declares: given as the setting's value, it changes nothing.
    @Test func everyDefaultHelpShowsIsTheDaemonsOwn() throws {
        let defaults = try ConfigurationLoader(flags: [:], environment: [:], configFile: nil).serveConfiguration()
        let shown = Settings.all.filter(\.showsFieldDefault)
        #expect(shown.count >= 25)
        for setting in shown {
            let text = try #require(setting.info.shownDefault, "\(setting.info.flag)")
            let given = try ConfigurationLoader(flags: [setting.info.flag: text], environment: [:], configFile: nil).serveConfiguration()
            #expect(given == defaults, "\(setting.info.flag) \(text) is not the default")
        }
        // And the other way: a value other than the default does change the configuration (the check above can fail).
        let other = try ConfigurationLoader(flags: [Settings.table.idleTimeout.flag: "76"], environment: [:], configFile: nil).serveConfiguration()
        #expect(other != defaults)
    }

    /// `--header-timeout`, the request timeout's older name, counts only where the request timeout is set in no source.
    @Test func theOlderTimeoutNameCountsOnlyWhereTheRequestTimeoutIsSetNowhere() throws {
        let header = try ConfigurationLoader(flags: ["--header-timeout": "12"], environment: [:], configFile: nil).serveConfiguration()
        #expect(header.requestTimeout == .seconds(12))
        let both = try ConfigurationLoader(
            flags: ["--header-timeout": "12"], environment: ["COUNTERSIGN_REQUEST_TIMEOUT": "40"], configFile: nil
        ).serveConfiguration()
        #expect(both.requestTimeout == .seconds(40))
        let neither = try ConfigurationLoader(flags: [:], environment: [:], configFile: nil).serveConfiguration()
        #expect(neither.requestTimeout == .seconds(30))
    }
}

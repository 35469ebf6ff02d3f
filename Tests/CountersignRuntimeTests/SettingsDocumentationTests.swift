import CountersignRuntime
import Foundation
import Testing

/// docs/operating.md's settings table is the table of `Settings` in prose: a row for every setting, with its flag,
/// environment variable and config key, and the default `serve --help` shows.
@Suite struct SettingsDocumentationTests {
    struct Row {
        let flag: String
        let environment: String
        let key: String
        let defaultText: String
    }

    /// The rows of the table: `| \`--flag VALUE\` | \`VARIABLE\` … | \`key\` … | default … |`.
    static func rows() throws -> [Row] {
        let document = try String(
            contentsOf: URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../docs/operating.md").standardized,
            encoding: .utf8)
        return document.split(separator: "\n").compactMap { line -> Row? in
            guard line.hasPrefix("| `--") else { return nil }
            // Cells split on `|` not escaped as `\|`.
            let cells = line.replacingOccurrences(of: "\\|", with: "\u{1}").split(separator: "|").map {
                $0.replacingOccurrences(of: "\u{1}", with: "|").trimmingCharacters(in: .whitespaces)
            }
            guard cells.count >= 4 else { return nil }
            func firstCode(_ cell: String) -> String {
                cell.split(separator: "`", omittingEmptySubsequences: false).dropFirst().first.map(String.init) ?? ""
            }
            return Row(
                flag: String(firstCode(cells[0]).split(separator: " ").first ?? ""), environment: firstCode(cells[1]), key: firstCode(cells[2]),
                defaultText: firstCode(cells[3]))
        }
    }

    @Test func everySettingHasItsRowWithItsNamesAndDefault() throws {
        let rows = try Self.rows()
        let byFlag = Dictionary(rows.map { ($0.flag, $0) }, uniquingKeysWith: { first, _ in first })
        #expect(rows.count == byFlag.count, "a flag with two rows")
        let settings = Settings.all
        #expect(Set(byFlag.keys) == Set(settings.map(\.info.flag)), "rows without a setting, or settings without a row")
        for setting in settings {
            let info = setting.info
            guard let row = byFlag[info.flag] else { continue }
            #expect(row.environment == info.environment, "\(info.flag): the row says \(row.environment)")
            #expect(row.key == info.fileKey, "\(info.flag): the row says \(row.key)")
            if setting.showsFieldDefault, let shown = info.shownDefault {
                #expect(row.defaultText == shown, "\(info.flag): the row's default is \(row.defaultText), serve --help says \(shown)")
            }
        }
    }
}

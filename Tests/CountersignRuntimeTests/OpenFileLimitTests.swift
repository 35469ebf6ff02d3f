import CountersignRuntime
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The open-file limit bounds the long polls a daemon can hold: raised at start, the unit's fits the default, and a
/// `--long-polls-max` above it is said.
@Suite struct OpenFileLimitTests {
    @Test func aLongPollCapAboveTheLimitIsSaidWithTheLimitThatWouldHoldIt() throws {
        let warning = try #require(OpenFileLimit.warning(longPolls: 100_000, limit: 65_536))
        #expect(warning.contains("open-file limit (65536)") && warning.contains("to \(100_000 + OpenFileLimit.reserve) or more"))
        #expect(OpenFileLimit.warning(longPolls: 100_000, limit: 100_000 + OpenFileLimit.reserve) == nil)
        #expect(OpenFileLimit.warning(longPolls: 1000, limit: 1024) != nil)
    }

    @Test func theUnitsLimitHoldsTheDefaultLongPollCap() throws {
        let unit = try String(
            contentsOf: URL(fileURLWithPath: #filePath).deletingLastPathComponent()
                .appendingPathComponent("../../systemd/countersign.service").standardized, encoding: .utf8)
        let line = try #require(unit.split(separator: "\n").first { $0.hasPrefix("LimitNOFILE=") })
        let limit = try #require(Int(line.dropFirst("LimitNOFILE=".count)))
        let defaults = try ConfigurationLoader(flags: [:], environment: [:], configFile: nil).serveConfiguration()
        #expect(OpenFileLimit.warning(longPolls: defaults.longPollsTotal, limit: limit) == nil, "LimitNOFILE=\(limit)")
    }

    @Test func theSoftLimitIsRaisedToTheHardOne() {
        let soft = OpenFileLimit.raise()
        var limit = rlimit()
        #expect(getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0)
        #expect(limit.rlim_cur == limit.rlim_max)
        #expect(soft == Int(clamping: limit.rlim_cur))
    }
}

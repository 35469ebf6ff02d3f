import CountersignCore
import CountersignHTTP
import CountersignRuntime
import Foundation
import NIOHTTP1
import TestSupport
import Testing

@testable import DaemonTestSupport

@Suite struct MetricsTests {
    /// Prometheus text exposition: `# HELP`/`# TYPE` comments and `name{labels} value` samples.
    static func samples(_ text: String) throws -> [String: Double] {
        var samples: [String: Double] = [:]
        let sample = #/^([a-zA-Z_:][a-zA-Z0-9_:]*(\{(?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*",?)*\})?) (-?[0-9.eE+-]+|NaN|\+Inf|-Inf)$/#
        for line in text.split(separator: "\n") where !line.isEmpty {
            if line.hasPrefix("# TYPE ") || line.hasPrefix("# HELP ") { continue }
            guard let match = line.wholeMatch(of: sample) else { throw TestFailure("not Prometheus text: \(line)") }
            samples[String(match.1)] = Double(String(match.3)) ?? .nan
        }
        return samples
    }

    @Test func metricsParseAndMoveWithTraffic() async throws {
        try await withTemporaryFolder { folder in
            let configuration = TestDaemon.configuration(folder) { $0.rateLimits[.statusPollsPerIP] = RateLimit(count: 3, window: 60) }
            try await TestDaemon.run(configuration, clock: ManualClock()) { daemon in
                let first = try await daemon.metricsAnswer()
                #expect(first.status == 200)
                #expect(first.contentType?.hasPrefix("text/plain") == true)
                // trust.md: never on the public listener, whose callers could read accounts off the counters.
                let public_ = try await daemon.call(.GET, "/metrics")
                #expect(public_.status == 404)
                #expect(public_["error"] == "not_found")
                let before = try Self.samples(first.text)
                #expect(before[#"countersign_live_requests{state="pending"}"#] == 0)
                // Every family says what it counts, right before its type; what only grows is a counter.
                let lines = first.text.split(separator: "\n").map(String.init)
                let typed = lines.indices.filter { lines[$0].hasPrefix("# TYPE ") }
                #expect(!typed.isEmpty)
                for index in typed {
                    let name = lines[index].split(separator: " ")[2]
                    #expect(index > 0 && lines[index - 1].hasPrefix("# HELP \(name) "), "\(lines[index])")
                }
                #expect(lines.contains("# TYPE countersign_push_queue_dropped_total counter"))
                // Which release this node runs.
                #expect(before[#"countersign_build_info{version="\#(CountersignVersion.current)"}"#] == 1)

                try await daemon.createUser(Fixture.email, password: "correct horse")
                // A device with an FCM token: push is off here, so its pushes count as `disabled`.
                let (key, _) = try await daemon.login(Fixture.email, password: "correct horse", fcmToken: "fcm-token-metrics")
                let (id, code) = try await daemon.initiate(Fixture.email, newPassword: "staple orbit lantern")
                let pending = try Self.samples(try await daemon.metricsText())
                #expect(pending[#"countersign_live_requests{state="pending"}"#] == 1)
                #expect(try await daemon.respond(id, apiKey: key, code: code).status == 200)
                for _ in 0..<4 { _ = try await daemon.status(id) }

                var text = try await daemon.metricsText()
                // Pushes are counted after the answers (they go out after them): waited for, bounded only as a hang detector.
                for _ in 0..<600 where !text.contains(#"countersign_pushes_total{type="approval_request""#) {
                    try await Task.sleep(for: .milliseconds(50))
                    text = try await daemon.metricsText()
                }
                #expect(text.contains(#"countersign_pushes_total{type="approval_request",outcome="disabled",provider="fcm"}"#))
                let after = try Self.samples(text)
                #expect(after[#"countersign_live_requests{state="approved"}"#] == 1)
                #expect(after[#"countersign_live_requests{state="pending"}"#] == 0)
                #expect(after[#"countersign_transitions_total{from="pending",to="approved",cause="approved"}"#] == 1)
                #expect(after[#"countersign_rate_limited_total{limit="statusPollsPerIP"}"#] == 1)
                let statusRoute = #"route="/api/mobile/auth/reset/phone/status/{requestId}""#
                #expect(after[#"countersign_http_requests_total{method="GET",\#(statusRoute),status="200"}"#] == 3)
                #expect(after[#"countersign_http_requests_total{method="GET",\#(statusRoute),status="429"}"#] == 1)
                #expect(after.keys.contains { $0.hasPrefix("countersign_http_request_duration_seconds_bucket") })
                // Route labels are templates: no request id anywhere.
                #expect(!text.contains(id))
                // docs/grafana-dashboard.json asks only for families this /metrics serves.
                let families = Set(text.split(separator: "\n").filter { $0.hasPrefix("# TYPE ") }.map { String($0.split(separator: " ")[2]) })
                let dashboard = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
                    .appendingPathComponent("docs/grafana-dashboard.json")
                let panels =
                    try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: dashboard)) as? [String: Any])["panels"] as? [[String: Any]]
                let expressions = (panels ?? []).flatMap { ($0["targets"] as? [[String: Any]] ?? []).compactMap { $0["expr"] as? String } }
                #expect(expressions.count >= 10)
                for expression in expressions {
                    for match in expression.matches(of: #/countersign_[a-z_]+/#) {
                        var name = String(match.output)
                        for suffix in ["_bucket", "_sum", "_count"] where name.hasSuffix(suffix) && !families.contains(name) {
                            name = String(name.dropLast(suffix.count))
                        }
                        #expect(families.contains(name), "the dashboard asks for \(name), which /metrics does not serve")
                    }
                }
            }
        }
    }
}

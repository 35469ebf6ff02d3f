import CountersignCore
import Foundation
import Metrics
import Prometheus
import Synchronization

/// Every metric the daemon exports, named in one place, recorded through
/// swift-metrics into this server's own Prometheus registry (served at `/metrics`).
/// Route labels are route templates, never raw paths: paths carry request ids.
public final class AppMetrics: Sendable {
    public let registry: PrometheusCollectorRegistry
    private let factory: PrometheusMetricsFactory

    enum Name {
        static let httpRequests = "countersign_http_requests_total"
        static let httpDuration = "countersign_http_request_duration_seconds"
        static let liveRequests = "countersign_live_requests"
        static let transitions = "countersign_transitions_total"
        static let pushes = "countersign_pushes_total"
        static let buildInfo = "countersign_build_info"
        static let rateLimited = "countersign_rate_limited_total"
        static let pushQueueWaiting = "countersign_push_queue_jobs"
        static let pushQueueDropped = "countersign_push_queue_dropped_total"
        static let outbox = "countersign_outbox_total"
        static let outboxWaiting = "countersign_outbox_waiting"
        static let longPollsWaiting = "countersign_long_polls_waiting"
        static let connectionsRefused = "countersign_connections_refused_total"
    }

    public init() {
        registry = PrometheusCollectorRegistry()
        var factory = PrometheusMetricsFactory(registry: registry)
        factory.defaultDurationHistogramBuckets = [
            .milliseconds(1), .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100),
            .milliseconds(250), .milliseconds(500), .seconds(1), .seconds(2.5), .seconds(5), .seconds(10), .seconds(30),
        ]
        self.factory = factory
        // Served at 0 from the start: a dashboard finds the family before the first refusal.
        Counter(label: Name.connectionsRefused, factory: factory).increment(by: 0)
    }

    /// One request's counter and timer; labels are route templates, so there are few.
    private struct HTTPSeries: Hashable {
        var method: String
        var route: String
        var status: Int
    }
    private let httpHandles = Mutex<[HTTPSeries: (counter: Metrics.Counter, timer: Metrics.Timer)]>([:])

    public func httpRequest(method: String, route: String, status: Int, duration: Duration) {
        let series = HTTPSeries(method: method, route: route, status: status)
        // Made once per series: the registry's lookup takes its global lock and hashes every label.
        let handles =
            httpHandles.withLock { $0[series] }
            ?? {
                let made = (
                    counter: Metrics.Counter(
                        label: Name.httpRequests, dimensions: [("method", method), ("route", route), ("status", String(status))], factory: factory),
                    timer: Metrics.Timer(label: Name.httpDuration, dimensions: [("method", method), ("route", route)], factory: factory)
                )
                httpHandles.withLock { $0[series] = made }
                return made
            }()
        handles.counter.increment()
        handles.timer.recordNanoseconds(duration.nanoseconds)
    }

    /// One counter series: its name and label values, in the order its labels are given.
    private struct CounterSeries: Hashable {
        var label: String
        var values: [String]
    }
    private let counterHandles = Mutex<[CounterSeries: Metrics.Counter]>([:])

    /// The counter of one series, made once: each push and transition counts on one.
    private func counter(_ label: String, _ dimensions: KeyValuePairs<String, String>) -> Metrics.Counter {
        let series = CounterSeries(label: label, values: dimensions.map(\.value))
        if let counter = counterHandles.withLock({ $0[series] }) { return counter }
        let made = Metrics.Counter(label: label, dimensions: dimensions.map { ($0.key, $0.value) }, factory: factory)
        counterHandles.withLock { $0[series] = made }
        return made
    }

    public func transition(_ transition: Transition) {
        counter(Name.transitions, ["from": transition.from.rawValue, "to": transition.to.rawValue, "cause": transition.cause.rawValue])
            .increment()
    }

    /// `countersign_build_info{version} 1`: which release this node runs.
    public func buildInfo(version: String = CountersignVersion.current) {
        Gauge(label: Name.buildInfo, dimensions: [("version", version)], factory: factory).record(1)
    }

    public func push(type: String, outcome: PushOutcome, provider: PushProvider) {
        counter(Name.pushes, ["type": type, "outcome": outcome.rawValue, "provider": provider.rawValue]).increment()
    }

    public func rateLimited(_ name: RateLimitName) {
        counter(Name.rateLimited, ["limit": name.rawValue]).increment()
    }

    /// Jobs waiting for the dispatcher, and jobs dropped so far because the queue was full
    /// (a counter: it grows by what was dropped since the last scrape).
    public func pushQueue(waiting: Int, dropped: Int) {
        Gauge(label: Name.pushQueueWaiting, factory: factory).record(waiting)
        let counter = Counter(label: Name.pushQueueDropped, factory: factory)
        let grown = droppedReported.withLock { reported in
            defer { reported = max(reported, dropped) }
            return max(0, dropped - reported)
        }
        counter.increment(by: grown)
    }

    private let droppedReported = Mutex(0)

    /// What each family counts, for the `# HELP` lines of the exposition.
    static let help: [String: String] = [
        Name.httpRequests: "HTTP requests answered, by method, route template and status.",
        Name.httpDuration: "Time to answer an HTTP request, by method and route template.",
        Name.liveRequests: "Approval requests live now, by state (pending, approved).",
        Name.transitions: "State changes of approval requests, by the state left and the state entered.",
        Name.pushes: "Push messages by type, outcome (sent, token_dead, rejected, dropped, auth_error, ...) and provider.",
        Name.buildInfo: "Always 1; the version label names the release this node runs.",
        Name.rateLimited: "Requests refused by a rate limit, by limit.",
        Name.pushQueueWaiting: "Push jobs waiting for the dispatcher.",
        Name.pushQueueDropped: "Push jobs dropped because the push queue was full.",
        Name.outbox: "Outbox attempts (mail, webhooks), by kind and outcome.",
        Name.outboxWaiting: "Outbox items still waiting to go, by kind.",
        Name.longPollsWaiting: "Long polls held open now.",
        Name.connectionsRefused: "Connections closed at once because their address had too many open.",
    ]

    /// The Prometheus text exposition, with a `# HELP` line before each family's `# TYPE` line.
    public func exposition() -> [UInt8] {
        let text = String(decoding: registry.emitToBuffer(), as: UTF8.self)
        var out = ""
        out.reserveCapacity(text.utf8.count + 2048)
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("# TYPE "), let name = line.split(separator: " ").dropFirst(2).first,
                let help = Self.help[String(name)]
            {
                out += "# HELP \(name) \(help)\n"
            }
            out += line
            out += "\n"
        }
        if out.hasSuffix("\n\n") { out.removeLast() }
        return Array(out.utf8)
    }

    /// One outbox item's attempt ended: `delivered`, `retried`, `failed` or `dropped`.
    public func outbox(kind: OutboxKind, outcome: String) {
        Counter(label: Name.outbox, dimensions: [("kind", kind.rawValue), ("outcome", outcome)], factory: factory).increment()
    }

    /// Outbox items still waiting to go, by kind.
    public func outboxWaiting(_ depth: [OutboxKind: Int]) {
        for kind in OutboxKind.allCases {
            Gauge(label: Name.outboxWaiting, dimensions: [("kind", kind.rawValue)], factory: factory).record(depth[kind] ?? 0)
        }
    }

    /// A connection closed at once: its address held as many as allowed.
    public func connectionRefused() {
        Counter(label: Name.connectionsRefused, factory: factory).increment()
    }

    /// Long polls held open now, waiting for a change (all addresses).
    public func longPollsWaiting(_ held: Int) {
        Gauge(label: Name.longPollsWaiting, factory: factory).record(held)
    }

    public func live(_ counts: [ApprovalState: Int]) {
        for state in [ApprovalState.pending, .approved] {
            Gauge(label: Name.liveRequests, dimensions: [("state", state.rawValue)], factory: factory).record(counts[state] ?? 0)
        }
    }
}

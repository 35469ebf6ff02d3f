import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import TestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The real `countersign` binary, started as systemd would start it.
@Suite struct DaemonProcessTests {
    /// The executable SwiftPM built next to this test bundle.
    static var binary: URL {
        URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("countersign")
    }

    /// Runs `countersign ARGUMENTS` to its end: its exit status and output (stdout and stderr).
    /// The operator's commands on a database run in-process (``CLI``); a command that needs a
    /// process of its own, an environment of its own or another program runs the binary, on a
    /// thread of its own (see ``onOwnThread(_:)``): `fcm check` talks to a fake FCM in this process.
    static func command(
        _ arguments: [String], environment: [String: String] = [:], program: URL? = nil
    ) async throws -> (
        status: Int32, output: String
    ) {
        if program == nil, environment.isEmpty, CLI.runsInProcess(arguments) { return await CLI.run(arguments) }
        return try await onOwnThread { try commandBlocking(arguments, environment: environment, program: program) }
    }

    static func commandBlocking(
        _ arguments: [String], environment: [String: String], program: URL? = nil
    ) throws -> (
        status: Int32, output: String
    ) {
        try runToEnd((program ?? binary).path, arguments, environment: environment)
    }

    static func http(
        _ method: HTTPMethod, _ url: String, json: String? = nil, headers: [(String, String)] = [], timeout: Int64 = 35
    ) async throws -> (Int, [String: any Sendable]) {
        var request = HTTPClientRequest(url: url)
        request.method = method
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        if let json {
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = .bytes(ByteBuffer(string: json))
        }
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(timeout))
        let body = try await response.body.collect(upTo: 1 << 20)
        let object = (try? JSONSerialization.jsonObject(with: Data(body.readableBytesView)) as? [String: any Sendable]) ?? [:]
        return (Int(response.status.code), object)
    }

    @Test func underSystemdItNotifiesFeedsTheWatchdogAndShutsDownGracefully() async throws {
        // setup
        let folder = try makeTemporaryFolder("countersign-daemon")
        defer { try? FileManager.default.removeItem(at: folder) }
        let notify = try NotifySocket(path: folder.appendingPathComponent("notify").path)
        var environment = ProcessInfo.processInfo.environment
        environment["NOTIFY_SOCKET"] = notify.path
        environment["WATCHDOG_USEC"] = "1000000"
        environment["STATE_DIRECTORY"] = folder.path
        let log = folder.appendingPathComponent("daemon.log")
        _ = FileManager.default.createFile(atPath: log.path, contents: nil)
        let logHandle = try FileHandle(forWritingTo: log)
        let process = try TiedProcess(
            Self.binary, ["serve", "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0", "--bcrypt-cost", "4", "--log-level", "debug"],
            environment: environment,
            output: logHandle)
        try logHandle.close()
        defer { process.stop() }
        let logText = { (try? String(contentsOf: log, encoding: .utf8)) ?? "" }

        // READY=1 arrives with the port the daemon bound (it chose it: nothing else can answer there),
        // and once it has, /healthz answers.
        var messages: [String] = []
        while !messages.contains(where: { $0.contains("READY=1") }) {
            let message = try #require(try await notify.receive(timeout: .seconds(60)), "no READY=1 from the daemon")
            messages.append(message)
        }
        let ready = try #require(messages.last)
        let status = try #require(ready.split(separator: "\n").first { $0.hasPrefix("STATUS=listening on 127.0.0.1:") })
        let port = try #require(Int(status.dropFirst("STATUS=listening on 127.0.0.1:".count).prefix { $0.isNumber }), "\(ready)")
        let base = "http://127.0.0.1:\(port)"
        let (healthStatus, health) = try await Self.http(.GET, "\(base)/healthz")
        #expect(healthStatus == 200)
        #expect(health["database"] as? String == "ok")
        #expect(FileManager.default.fileExists(atPath: folder.appendingPathComponent("countersign.sqlite").path))

        // WATCHDOG=1 keeps coming while the daemon is healthy, at half the 1 s period: told without a
        // clock by the STATUS line it sends every 5 s of the same ticks, so 10 pings between two.
        var statuses = 0
        var pingsBetween = 0
        while statuses < 2 {
            let message = try #require(try await notify.receive(timeout: .seconds(30)), "notifications stopped")
            if message.contains("WATCHDOG=1") && statuses == 1 { pingsBetween += 1 }
            if message.hasPrefix("STATUS=listening") { statuses += 1 }
        }
        // A tick the sweeper or database missed on a busy machine sends no ping; a pace of the whole
        // period would give 5, of a quarter 20.
        #expect((8...10).contains(pingsBetween), "\(pingsBetween) WATCHDOG=1 between two STATUS lines")

        // act: SIGTERM while a long poll waits (it would wait 30 s; the client gives up after 25 s,
        // so an answer at all is the drain's).
        let (_, initiated) = try await Self.http(
            .POST, "\(base)/api/mobile/auth/reset/phone/initiate", json: #"{"email":"ana@example.com","newPassword":"staple orbit lantern"}"#)
        let id = try #require(initiated["requestId"] as? String)
        async let poll = Self.http(.GET, "\(base)/api/mobile/auth/reset/phone/status/\(id)?wait=30", timeout: 25)
        let metricsPort = try #require(RunningDaemon.listeningPort(in: log, from: 0, line: "metrics listening"), "\(logText())")
        try await DaemonProcessTests.waitForLongPolls(1, metrics: "http://127.0.0.1:\(metricsPort)")
        process.signal(SIGTERM)

        // check
        let pollStatus: Int
        let pollBody: [String: any Sendable]
        do {
            (pollStatus, pollBody) = try await poll
        } catch {
            Issue.record("the long poll waiting at SIGTERM got no answer from the drain: \(error); the daemon's log:\n\(logText().suffix(6000))")
            return
        }
        #expect(pollStatus == 200)
        #expect(pollBody["status"] as? String == "pending")
        #expect(try await process.exit(within: .seconds(60)), "still running 60 s after SIGTERM")
        #expect(process.terminationStatus == 0)
        #expect(process.terminationReason == .exit)
        var rest: [String] = []
        while let message = try await notify.receive(timeout: .milliseconds(200)) { rest.append(message) }
        #expect(rest.contains { $0.contains("STOPPING=1") })
    }
}

extension DaemonProcessTests {
    /// The body of `GET url`, as text.
    static func text(_ url: String) async throws -> String {
        let response = try await HTTPClient.shared.execute(HTTPClientRequest(url: url), timeout: .seconds(30))
        return String(buffer: try await response.body.collect(upTo: 1 << 22))
    }

    /// The daemon's `countersign_long_polls_waiting` gauge, read from `/metrics` at `metrics` (its metrics listener).
    static func longPollsWaiting(metrics: String) async throws -> Int? {
        let line = try await text("\(metrics)/metrics").split(separator: "\n").first { $0.hasPrefix("countersign_long_polls_waiting ") }
        return line.flatMap { Double($0.split(separator: " ").last ?? "") }.map { Int($0) }
    }

    /// Returns once `count` long polls are parked on the daemon at `base`: an event, not a pause
    /// (the bound only turns a hang into a failure).
    static func waitForLongPolls(_ count: Int, metrics: String) async throws {
        let clock = ContinuousClock()
        let start = clock.now
        while try await longPollsWaiting(metrics: metrics) ?? 0 < count {
            guard clock.now - start < .seconds(60) else { throw DaemonStartError(description: "\(count) long polls never parked at \(metrics)") }
            try await Task.sleep(for: .milliseconds(20))
        }
    }
}

extension DaemonProcessTests {
    /// Whether process `pid` still runs (a zombie does not).
    static func alive(_ pid: Int32) -> Bool {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8) else { return false }
        let state = stat.split(separator: ")").last?.split(separator: " ").first
        return state != "Z" && state != "X"
    }

    /// A test process killed from outside leaves no daemon behind. Here a shell
    /// plays the test process: it starts the daemon the way the tests do
    /// (``TiedProcess``'s launcher, fed from a pipe only the shell writes to),
    /// says the daemon's pid, and blocks; then it is killed with SIGKILL.
    @Test(.timeLimit(.minutes(2))) func aDaemonStartedByATestDiesWithTheTestProcess() async throws {
        try await MailDeliveryProcessTests.withFolder { folder in
            let fifo = folder.appendingPathComponent("never").path
            #expect(mkfifo(fifo, 0o600) == 0)
            let script = """
                exec 5> >(exec bash -c "$LAUNCHER" "$DAEMON" serve --listen 127.0.0.1:0 --database "$DIR/c.sqlite" --bcrypt-cost 4)
                echo "$!" > "$DIR/daemon.pid"
                read -r _ < "$DIR/never"
                """
            var environment = ProcessInfo.processInfo.environment
            environment["LAUNCHER"] = TiedProcess.launcher
            environment["DAEMON"] = Self.binary.path
            environment["DIR"] = folder.path
            let parent = try TiedProcess(URL(fileURLWithPath: "/bin/bash"), ["-c", script], environment: environment)
            defer { parent.stop() }
            let pidFile = folder.appendingPathComponent("daemon.pid")
            let clock = ContinuousClock()
            let start = clock.now
            var daemon: Int32?
            while daemon == nil && clock.now - start < .seconds(60) {
                daemon = (try? String(contentsOf: pidFile, encoding: .utf8)).flatMap { Int32($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
                try await Task.sleep(for: .milliseconds(50))
            }
            let pid = try #require(daemon, "the shell never started the daemon")
            defer { if Self.alive(pid) { kill(pid, SIGKILL) } }
            // It runs: the daemon binary itself, under the launcher's pid.
            while !((try? String(contentsOfFile: "/proc/\(pid)/cmdline", encoding: .utf8)) ?? "").hasPrefix(Self.binary.path)
                && clock.now - start < .seconds(60)
            {
                try await Task.sleep(for: .milliseconds(50))
            }
            #expect(Self.alive(pid))

            parent.signal(SIGKILL)
            parent.waitUntilExit()
            let killed = clock.now
            while Self.alive(pid) && clock.now - killed < .seconds(60) { try await Task.sleep(for: .milliseconds(50)) }
            #expect(!Self.alive(pid), "the daemon outlived the process that started it")
        }
    }
}

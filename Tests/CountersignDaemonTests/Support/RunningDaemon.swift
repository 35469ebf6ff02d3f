import Foundation
import NIOHTTP1
import TestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A `countersign serve` started by a test: tied to the test process (it dies
/// with it), on a port the daemon chose itself and named in its own log, so
/// a daemon left over from an earlier run can never answer in its place.
final class RunningDaemon: Sendable {
    let child: TiedProcess
    let port: Int
    /// Where its `/metrics` listener took a port of its own (`--metrics-listen 127.0.0.1:0`).
    let metricsPort: Int
    var base: String { "http://127.0.0.1:\(port)" }
    var metricsBase: String { "http://127.0.0.1:\(metricsPort)" }

    private init(child: TiedProcess, port: Int, metricsPort: Int) {
        self.child = child
        self.port = port
        self.metricsPort = metricsPort
    }

    var processIdentifier: Int32 { child.processIdentifier }
    var isRunning: Bool { child.isRunning }
    var terminationReason: Process.TerminationReason { child.terminationReason }
    /// Waits for the program to end without holding a shared thread (its
    /// graceful stop may take seconds); `limit` only turns a hang into a failure.
    func exited(within limit: Duration = .seconds(60)) async throws {
        #expect(try await child.exit(within: limit), "still running after \(limit)")
    }
    func signal(_ signal: Int32) { child.signal(signal) }
    /// SIGKILL if it still runs; for `defer` blocks.
    func stop() { child.stop() }

    /// Starts `countersign serve ARGUMENTS` on 127.0.0.1 and a port of its
    /// own choosing (bcrypt cost 4), output appended to `log`; returns once
    /// it has said where it listens and answers `/healthz` there. The bound
    /// is a hang detector for a daemon that never starts.
    static func start(_ arguments: [String], log: URL, environment: [String: String]? = nil) async throws -> RunningDaemon {
        if !FileManager.default.fileExists(atPath: log.path) { _ = FileManager.default.createFile(atPath: log.path, contents: nil) }
        let handle = try FileHandle(forWritingTo: log)
        let offset = handle.seekToEndOfFile()
        let child = try TiedProcess(
            DaemonProcessTests.binary,
            ["serve", "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0", "--bcrypt-cost", "4"] + arguments,
            environment: environment, output: handle)
        try? handle.close()
        let clock = ContinuousClock()
        let start = clock.now
        while clock.now - start < .seconds(120) {
            if let port = Self.listeningPort(in: log, from: offset),
                let metricsPort = Self.listeningPort(in: log, from: offset, line: "metrics listening"),
                let (status, _) = try? await DaemonProcessTests.http(.GET, "http://127.0.0.1:\(port)/healthz", timeout: 5),
                status == 200 || status == 503
            {
                return RunningDaemon(child: child, port: port, metricsPort: metricsPort)
            }
            guard child.isRunning else { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        child.stop()
        let said = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
        throw DaemonStartError(description: "the daemon did not start: \(said.suffix(4000))")
    }

    /// The port of the first `listening` line (or `metrics listening`) written to `log` after `offset`.
    static func listeningPort(in log: URL, from offset: UInt64, line message: String = "listening") -> Int? {
        guard let handle = try? FileHandle(forReadingFrom: log) else { return nil }
        defer { try? handle.close() }
        try? handle.seek(toOffset: offset)
        let text = String(decoding: handle.readDataToEndOfFile(), as: UTF8.self)
        // `--log-format json`: `{"address": "[IPv4]127.0.0.1/127.0.0.1:PORT", "message": "listening", …}`
        for line in text.split(separator: "\n") where line.hasPrefix("{") {
            guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: String], object["message"] == message,
                let port = object["address"]?.split(separator: ":").last.flatMap({ Int($0) }), port > 0
            else { continue }
            return port
        }
        // `… address=[IPv4]127.0.0.1/127.0.0.1:PORT [CountersignHTTP] listening`
        for line in text.split(separator: "\n") where line.hasSuffix("] \(message)") {
            guard let address = line.split(separator: " ").first(where: { $0.hasPrefix("address=") }),
                let port = address.split(separator: ":").last.flatMap({ Int($0) }), port > 0
            else { continue }
            return port
        }
        return nil
    }
}

struct DaemonStartError: Error, CustomStringConvertible {
    let description: String
}

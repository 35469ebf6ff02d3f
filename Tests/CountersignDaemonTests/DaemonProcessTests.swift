import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
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

    static func freePort() throws -> Int {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(descriptor) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, length) }
        }
        _ = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
        }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    /// Runs `countersign ARGUMENTS` to its end: its exit status and output (stdout and stderr).
    static func command(_ arguments: [String], environment: [String: String] = [:]) throws -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = binary
        process.arguments = arguments
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        try process.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
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
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("countersign-daemon-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let notify = try NotifySocket(path: folder.appendingPathComponent("notify").path)
        let port = try Self.freePort()
        let base = "http://127.0.0.1:\(port)"
        let process = Process()
        process.executableURL = Self.binary
        process.arguments = ["serve", "--listen", "127.0.0.1:\(port)", "--bcrypt-cost", "4", "--log-level", "warning"]
        var environment = ProcessInfo.processInfo.environment
        environment["NOTIFY_SOCKET"] = notify.path
        environment["WATCHDOG_USEC"] = "1000000"
        environment["STATE_DIRECTORY"] = folder.path
        process.environment = environment
        process.standardError = FileHandle.nullDevice
        try process.run()
        defer { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }

        // READY=1 arrives, and once it has, /healthz answers at once.
        var messages: [String] = []
        while !messages.contains(where: { $0.contains("READY=1") }) {
            let message = try #require(notify.receive(timeout: .seconds(30)), "no READY=1 from the daemon")
            messages.append(message)
        }
        // It answers (the bound is for a loaded machine, not a speed check).
        let (healthStatus, health) = try await Self.http(.GET, "\(base)/healthz", timeout: 15)
        #expect(healthStatus == 200)
        #expect(health["database"] as? String == "ok")
        #expect(messages.last?.contains("STATUS=listening on 127.0.0.1:\(port)") == true)
        #expect(FileManager.default.fileExists(atPath: folder.appendingPathComponent("countersign.sqlite").path))

        // WATCHDOG=1 at half the 1 s period, counted from now (earlier ones are drained first).
        while notify.receive(timeout: .zero) != nil {}
        let clock = ContinuousClock()
        let watchStart = clock.now
        var pings = 0
        while clock.now - watchStart < .milliseconds(2600) {
            if let message = notify.receive(timeout: .milliseconds(200)), message.contains("WATCHDOG=1") { pings += 1 }
        }
        #expect((3...7).contains(pings), "WATCHDOG=1 \(pings) times in 2.6 s")

        // act: SIGTERM while a long poll waits.
        let (_, initiated) = try await Self.http(
            .POST, "\(base)/api/mobile/auth/reset/phone/initiate", json: #"{"email":"ana@example.com","newPassword":"staple orbit lantern"}"#)
        let id = try #require(initiated["requestId"] as? String)
        async let poll = Self.http(.GET, "\(base)/api/mobile/auth/reset/phone/status/\(id)?wait=30")
        try await Task.sleep(for: .milliseconds(300))
        let signalled = clock.now
        kill(process.processIdentifier, SIGTERM)

        // check
        let pollStatus: Int
        let pollBody: [String: any Sendable]
        do {
            (pollStatus, pollBody) = try await poll
        } catch {
            Issue.record("the long poll waiting at SIGTERM got no answer: \(error)")
            return
        }
        #expect(pollStatus == 200)
        #expect(pollBody["status"] as? String == "pending")
        // Answered by the drain, not after its 30 s wait (bound loose enough for a loaded machine).
        #expect(clock.now - signalled < .seconds(5))
        while process.isRunning && clock.now - signalled < .seconds(10) {
            try await Task.sleep(for: .milliseconds(50))
        }
        #expect(!process.isRunning, "still running 10 s after SIGTERM")
        #expect(process.terminationStatus == 0)
        #expect(process.terminationReason == .exit)
        var rest: [String] = []
        while let message = notify.receive(timeout: .milliseconds(200)) { rest.append(message) }
        #expect(rest.contains { $0.contains("STOPPING=1") })
    }
}

import AsyncHTTPClient
import CountersignAPI
import Foundation
import OpenAPIAsyncHTTPClient
import OpenAPIRuntime
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// One approval, start to end, through the client swift-openapi-generator made from
/// docs/openapi.yaml, against the daemon binary named by `COUNTERSIGN_BINARY`: the
/// relying service creates a user and an enrollment code, a device enrolls with it,
/// the service asks, the device sees the prompt and approves with the number, the
/// service reads the approval and completes it, exactly once.
@Suite struct OneApprovalTests {
    @Test func oneApprovalThroughTheGeneratedClient() async throws {
        let binary = try #require(
            ProcessInfo.processInfo.environment["COUNTERSIGN_BINARY"],
            "set COUNTERSIGN_BINARY to the daemon (scripts/check-generated-client.sh BINARY does)")
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("countersign-openapi-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let database = folder.appendingPathComponent("countersign.sqlite").path

        // The integration, as an operator makes it.
        let added = try run(binary, ["integration", "add", "app", "--json", "--database", database])
        let created = try #require(try JSONSerialization.jsonObject(with: Data(added.utf8)) as? [String: Any])
        let apiKey = try #require(created["apiKey"] as? String)

        let port = try freePort()
        let daemon = Process()
        daemon.executableURL = URL(fileURLWithPath: binary)
        daemon.arguments = [
            "serve", "--database", database, "--listen", "127.0.0.1:\(port)", "--metrics-listen", "off", "--bcrypt-cost", "4",
        ]
        let log = folder.appendingPathComponent("daemon.log")
        FileManager.default.createFile(atPath: log.path, contents: nil)
        daemon.standardOutput = try FileHandle(forWritingTo: log)
        daemon.standardError = daemon.standardOutput
        try daemon.run()
        defer {
            daemon.terminate()
            daemon.waitUntilExit()
        }

        let server = try #require(URL(string: "http://127.0.0.1:\(port)"))
        let transport = AsyncHTTPClientTransport(configuration: .init(client: .shared, timeout: .seconds(40)))
        // The daemon writes times as RFC 3339 with milliseconds ("2026-12-02T10:15:30.125Z"); the
        // runtime's default reads whole seconds only, so a client is configured for them.
        let configuration = Configuration(dateTranscoder: .iso8601WithFractionalSeconds)
        let open = Client(serverURL: server, configuration: configuration, transport: transport)
        let service = Client(
            serverURL: server, configuration: configuration, transport: transport, middlewares: [KeyMiddleware(.integration(apiKey))])

        // Up: the health answer, within a minute (a hang detector).
        var healthy = false
        for _ in 0..<600 where !healthy {
            if case .ok = try? await open.getHealth() { healthy = true } else { try await Task.sleep(for: .milliseconds(100)) }
        }
        #expect(healthy, "the daemon did not answer /healthz: \((try? String(contentsOf: log, encoding: .utf8)) ?? "")")

        let email = "ana@example.com"
        let user = try await service.createUser(body: .json(.init(email: email))).created.body.json
        #expect(user.email == email)
        let code = try await service.createEnrollment(path: .init(email: email)).created.body.json.enrollmentCode
        let login = try await open.enrollDevice(body: .json(.init(enrollmentCode: code, deviceName: "Ana's phone", platform: "android")))
            .ok.body.json
        let phone = Client(
            serverURL: server, configuration: configuration, transport: transport, middlewares: [KeyMiddleware(.device(login.apiKey))])

        let asked = try await service.createApproval(
            body: .json(
                .init(user: email, action: "login", title: "Sign in to Example Admin", context: .init(additionalProperties: ["ip": "203.0.113.7"])))
        )
        .created.body.json
        #expect(asked.status == .pending)
        let number = try #require(asked.numberCode, "number matching is on by default")

        let pending = try await phone.listPendingApprovals().ok.body.json.approvals
        #expect(pending.map(\.requestId) == [asked.approvalId])
        let answered = try await phone.respondToApproval(
            path: .init(requestId: asked.approvalId), body: .json(.init(decision: .approve, numberCode: number))
        ).ok.body.json
        #expect(answered.status == .approved)

        let status = try await service.getApproval(path: .init(approvalId: asked.approvalId), query: .init(wait: 0)).ok.body.json
        #expect(status.status == .approved)
        #expect(status.device?.id == login.device.id)
        let completed = try await service.completeApproval(path: .init(approvalId: asked.approvalId)).ok.body.json
        #expect(completed.status == .completed)
        // Exactly once: the second completion is a conflict, as documented.
        guard case .conflict = try await service.completeApproval(path: .init(approvalId: asked.approvalId)) else {
            Issue.record("a second completion was not a 409")
            return
        }
    }

    /// Runs `binary` to its end; its standard output (standard error goes to the test's).
    func run(_ binary: String, _ arguments: [String]) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        let output = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw Failure("\(arguments.joined(separator: " ")) exited \(process.terminationStatus)") }
        return String(decoding: output, as: UTF8.self)
    }

    /// A port no one listens on now, from the kernel.
    func freePort() throws -> Int {
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard socket >= 0 else { throw Failure("socket: \(errno)") }
        defer { close(socket) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(socket, $0, length) == 0 && getsockname(socket, $0, &length) == 0 }
        }
        guard bound else { throw Failure("bind: \(errno)") }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    struct Failure: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }
}

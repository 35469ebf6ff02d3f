import ArgumentParser
import AsyncHTTPClient
import CountersignCore
import CountersignRuntime
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import ServiceRunner

/// Runs a daemon in-process on a temporary database and walks through one
/// whole phone reset over real HTTP, printing each step.
struct Demo: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Walk through one phone-approved password reset against a throw-away daemon."
    )

    @Option(help: "bcrypt cost for the demo's hashes (default 10).") var bcryptCost: Int = 10

    func run() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("countersign-demo-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }

        var logger = Logger(label: "countersign")
        logger.logLevel = .warning
        var configuration = ServeConfiguration(databasePath: folder.appendingPathComponent("demo.sqlite").path)
        configuration.port = 0
        configuration.bcryptCost = bcryptCost
        let readiness = RunningServices.Readiness()
        let server = try await buildServer(configuration: configuration, logger: logger) { port in
            readiness.ready(port: port)
        }
        try await RunningServices.run(server.services, readiness: readiness, logger: logger) { port in
            let walk = Walkthrough(base: "http://127.0.0.1:\(port)", store: server.store, hasher: BcryptPasswordHasher(cost: bcryptCost))
            try await walk.run()
        }
    }
}

struct Walkthrough {
    let base: String
    let store: any UserAdministration
    let hasher: BcryptPasswordHasher
    let client = HTTPClient.shared

    func run() async throws {
        let email = "ana@example.com"
        let oldPassword = "correct horse battery"
        let newPassword = "staple orbit lantern"

        step("An operator creates the account (countersign user add \(email))")
        _ = try await store.createUser(email: email, passwordHash: try await hasher.hash(oldPassword))
        print("    created \(email)\n")

        step("Ana's phone signs in and becomes a trusted device")
        let login = try await call(
            "POST", "/api/mobile/auth/login",
            ["email": email, "password": oldPassword, "deviceName": "Ana's iPhone", "platform": "iOS", "fcmToken": "unknown"])
        guard let apiKey = login["apiKey"] as? String else { throw ValidationError("login gave no API key") }

        step("On her laptop, Ana forgot her password and asks for a phone-approved reset")
        let initiate = try await call("POST", "/api/mobile/auth/reset/phone/initiate", ["email": email, "newPassword": newPassword])
        guard let requestID = initiate["requestId"] as? String else { throw ValidationError("initiate gave no request id") }
        let code = initiate["numberCode"] as? String

        step("The phone asks which approvals are waiting (pull mode: push is off in this demo)")
        _ = try await call("GET", "/api/mobile/approvals/pending", apiKey: apiKey)

        step("The laptop long-polls the status while the phone approves with the number it shows (\(code ?? "none"))")
        let started = ContinuousClock.now
        async let poll = call("GET", "/api/mobile/auth/reset/phone/status/\(requestID)?wait=10", quiet: true)
        try await Task.sleep(for: .milliseconds(300))
        var answer: [String: Any] = ["decision": "approve"]
        if let code { answer["numberCode"] = code }
        _ = try await call("POST", "/api/mobile/approvals/\(requestID)/respond", answer, apiKey: apiKey)
        let status = try await poll
        print("    long poll answered after \((ContinuousClock.now - started).formatted(.units(allowed: [.milliseconds]))): \(json(status))\n")

        step("The laptop completes the reset: the new password takes effect, exactly once")
        _ = try await call("POST", "/api/mobile/auth/reset/phone/complete/\(requestID)")
        _ = try await call("POST", "/api/mobile/auth/reset/phone/complete/\(requestID)")

        step("The old password no longer works; the new one does")
        _ = try await call(
            "POST", "/api/mobile/auth/login",
            ["email": email, "password": oldPassword, "deviceName": "Laptop", "platform": "web"])
        _ = try await call(
            "POST", "/api/mobile/auth/login",
            ["email": email, "password": newPassword, "deviceName": "Laptop", "platform": "web"])
        print("Done: that is the whole flow. Run `countersign serve` for a real daemon.")
    }

    private func step(_ text: String) {
        print("==> \(text)")
    }

    private func call(
        _ method: String,
        _ path: String,
        _ body: [String: Any]? = nil,
        apiKey: String? = nil,
        quiet: Bool = false
    ) async throws -> [String: Any] {
        var request = HTTPClientRequest(url: base + path)
        request.method = .RAW(value: method)
        if let apiKey { request.headers.add(name: "X-API-Key", value: apiKey) }
        if let body {
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = .bytes(ByteBuffer(bytes: try JSONSerialization.data(withJSONObject: body)))
        }
        if !quiet {
            print("    \(method) \(path)\(body.map { " " + json(redacted($0)) } ?? "")\(apiKey == nil ? "" : "  [X-API-Key]")")
        }
        let response = try await client.execute(request, timeout: .seconds(30))
        let bytes = try await response.body.collect(upTo: 1 << 20)
        let object = (try? JSONSerialization.jsonObject(with: Data(bytes.readableBytesView)) as? [String: Any]) ?? [:]
        if !quiet { print("    <- \(response.status.code) \(json(redacted(object)))\n") }
        return object
    }

    /// Passwords and keys are shortened in what the demo prints.
    private func redacted(_ object: [String: Any]) -> [String: Any] {
        object.reduce(into: [:]) { result, pair in
            switch pair.key {
            case "password", "newPassword": result[pair.key] = "••••••"
            case "apiKey": result[pair.key] = ((pair.value as? String)?.prefix(6)).map { "\($0)…" } ?? pair.value
            default: result[pair.key] = pair.value
            }
        }
    }

    private func json(_ object: [String: Any]) -> String {
        guard let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]) else { return "\(object)" }
        return String(decoding: data, as: UTF8.self)
    }
}

import ArgumentParser
import AsyncHTTPClient
import CountersignCore
import CountersignDevice
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

    @Option(help: ArgumentHelp("bcrypt cost for the demo's hashes.", valueName: "cost")) var bcryptCost: Int = 10
    @Flag(help: "Walk through the email reset instead: with SMTP configured the mail is sent, else the demo prints it.")
    var email = false
    @Option(help: ArgumentHelp("With --email: the demo account's address, where the mail goes.", valueName: "address"))
    var to = "ana@example.com"
    @Option(help: configHelp, completion: .file()) var config: String?
    @OptionGroup var mail: MailOptions

    func run() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("countersign-demo-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }

        var logger = Logger(label: "countersign")
        logger.logLevel = .warning
        var configuration = ServeConfiguration(databasePath: folder.appendingPathComponent("demo.sqlite").path)
        configuration.port = 0
        configuration.bcryptCost = bcryptCost
        // The demo shows the flows, not the counters: no second listener to collide with a running daemon.
        configuration.metricsListen = nil
        var printer: PrintingMailSender?
        if email {
            configuration.email.smtp = try await loadOrExit {
                try GivenSettings(mail).loader(config: config).smtpConfiguration()
            }
            if configuration.email.smtp == nil { printer = PrintingMailSender() }
            // The mail's link must name the port this daemon listens on: a free one, chosen before it starts.
            configuration.port = try Self.freeLoopbackPort()
            configuration.email.publicURL = "http://127.0.0.1:\(configuration.port)"
        }
        let readiness = RunningServices.Readiness()
        let server = try await buildApplication(configuration: configuration, logger: logger, mailSender: printer) { port in
            readiness.ready(port: port)
        }
        try await RunningServices.run(server.services, readiness: readiness, logger: logger) { port in
            print("The demo's daemon listens on http://127.0.0.1:\(port) (database in \(folder.path), removed at the end).\n")
            let keyPath = configuration.email.secretKeyPath(
                databasePath: configuration.databasePath, environment: ProcessInfo.processInfo.environment)
            let walk = Walkthrough(
                base: "http://127.0.0.1:\(port)", store: server.store, keys: try SecretKeyFile.load(path: keyPath, create: false, logger: logger),
                hasher: BcryptPasswordHasher(cost: bcryptCost))
            if email {
                try await walk.runEmail(to: to, printed: printer)
            } else {
                try await walk.run()
            }
        }
    }
}

extension Demo {
    /// A port on 127.0.0.1 that nothing listens on now (the kernel's choice).
    static func freeLoopbackPort() throws -> Int {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw CommandFailure("cannot open a socket: \(String(cString: strerror(errno)))") }
        defer { close(descriptor) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, length) == 0 && getsockname(descriptor, $0, &length) == 0
            }
        }
        guard bound else { throw CommandFailure("cannot find a free port on 127.0.0.1: \(String(cString: strerror(errno)))") }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}

struct Walkthrough {
    let base: String
    let store: any UserAdministration & OfflineCodeStore
    /// The daemon's secret keys: the bypass code is stored as a keyed hash, as `user bypass-codes` stores it.
    let keys: SecretKeys
    let hasher: BcryptPasswordHasher

    func run() async throws {
        let email = "ana@example.com"
        let oldPassword = "correct horse battery"
        let newPassword = "staple orbit lantern"

        step("An operator creates the account (countersign user add \(email))")
        _ = try await store.createUser(email: email, passwordHash: try await hasher.hash(oldPassword))
        print("    created \(email)\n")

        step("Ana's phone signs in with a device key of its own (P-256; countersign device simulate does the same)")
        let phone = CountersignDevice(baseURL: base, store: MemoryKeyStore(), transport: deviceTransport)
        let signedIn = try await phone.signIn(email: email, password: oldPassword, name: "Ana's iPhone", platform: "ios")
        print("    trusted device \(signedIn.deviceID), key-bound: \(signedIn.keyBound)\n")

        step("On her laptop, Ana forgot her password and asks for a phone-approved reset")
        let initiate = try await call("POST", "/api/mobile/auth/reset/phone/initiate", ["email": email, "newPassword": newPassword])
        guard let requestID = initiate["requestId"] as? String else { throw CommandFailure("initiate gave no request id") }
        let code = initiate["numberCode"] as? String

        step("The phone asks which approvals are waiting (pull mode: push is off in this demo)")
        _ = try await phone.pending()

        step("The laptop long-polls the status while the phone approves with the number it shows (\(code ?? "none")), signed with its key")
        let started = ContinuousClock.now
        async let poll = call("GET", "/api/mobile/auth/reset/phone/status/\(requestID)?wait=10", quiet: true)
        try await Task.sleep(for: .milliseconds(300))
        _ = try await phone.answer(requestID, .approve, numberCode: code)
        let status = try await poll
        print(
            "    long poll answered after \((ContinuousClock.now - started).formatted(.units(allowed: [.milliseconds]))): \(Walkthrough.json(status))\n"
        )

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

        step("Weeks later Ana's phone is lost: she asks for another reset")
        let again = try await call(
            "POST", "/api/mobile/auth/reset/phone/initiate", ["email": email, "newPassword": "lantern staple orbit"])
        guard let secondID = again["requestId"] as? String else { throw CommandFailure("initiate gave no request id") }

        // An offline code is typed into relying services' pages every day: it never resets a password.
        step(
            "The operator checks who she is and gives her a one-time code for password resets (countersign user bypass-codes \(email) --for-password-reset)"
        )
        guard let user = try await store.user(email: email) else { throw CommandFailure("no user \(email)") }
        let bypass = BypassCode.generate()
        let now = Date()
        try await store.replaceBypassCodes(
            userID: user.id, codeHashes: [BypassCode.hash(bypass, userID: user.id, keys: keys)], forPasswordReset: true,
            expiresAt: now.addingTimeInterval(86400), now: now)
        print("    bypass code \(BypassCode.display(bypass)), valid once, for a day\n")

        step("She types it on the laptop where the reset waits for her phone")
        _ = try await call("POST", "/api/mobile/auth/reset/phone/verify-code/\(secondID)", ["code": bypass])
        _ = try await call("GET", "/api/mobile/auth/reset/phone/status/\(secondID)")
        _ = try await call("POST", "/api/mobile/auth/reset/phone/complete/\(secondID)")
        print("Done: that is the whole flow. Run `countersign serve` for a real daemon.")
    }

    /// The email reset: the mail is sent through the configured SMTP server
    /// (the code is then read from standard input), or printed.
    func runEmail(to email: String, printed: PrintingMailSender?) async throws {
        let oldPassword = "correct horse battery"
        let newPassword = "staple orbit lantern"

        step("An operator creates the account (countersign user add \(email))")
        _ = try await store.createUser(email: User.normalize(email: email), passwordHash: try await hasher.hash(oldPassword))
        print("    created \(email)\n")

        step("Ana lost her phone; the app's \"Email with Code\" screen asks for a code")
        _ = try await call("POST", "/api/mobile/auth/reset/email/initiate", ["email": email])

        let code: String
        if let printed {
            step("No SMTP server is configured (--smtp-url): this is the mail the daemon would send")
            let message = try await printed.next()
            print("    To: \(message.to)\n    Subject: \(message.subject)\n")
            print(message.text.split(separator: "\n", omittingEmptySubsequences: false).map { "    | \($0)" }.joined(separator: "\n"))
            guard let found = message.text.firstMatch(of: /\b[0-9]{6}\b/) else { throw CommandFailure("the mail holds no code") }
            code = String(found.output)
        } else {
            step("The mail is on its way to \(email) through the configured SMTP server")
            guard let typed = readSecretLine(prompt: "    Type the 6-digit code from the mail: "), !typed.isEmpty else {
                print("    no code typed: stopping here (the mail was queued and sent).")
                return
            }
            code = typed.trimmingCharacters(in: .whitespaces)
        }

        step("The app sends the code with the new password: it is set, and the code is used up")
        _ = try await call("POST", "/api/mobile/auth/reset/email/verify", ["email": email, "code": code, "newPassword": newPassword])
        _ = try await call("POST", "/api/mobile/auth/reset/email/verify", ["email": email, "code": code, "newPassword": newPassword])

        step("The old password no longer works; the new one does")
        _ = try await call("POST", "/api/mobile/auth/login", ["email": email, "password": oldPassword, "deviceName": "Laptop", "platform": "web"])
        _ = try await call("POST", "/api/mobile/auth/login", ["email": email, "password": newPassword, "deviceName": "Laptop", "platform": "web"])
        print("Done. The link in the mail opens the same reset as a web page (GET /reset-password?token=…).")
    }

    /// The phone's calls (the `CountersignDevice` library), printed like the demo's own.
    var deviceTransport: CountersignDevice.Transport {
        let base = base
        let http = CountersignDevice.urlSession()
        return { method, url, body, apiKey in
            let sent = body.flatMap { try? JSONSerialization.jsonObject(with: $0) as? [String: any Sendable] }
            print(
                "    \(method) \(url.dropFirst(base.count))\(sent.map { " " + Walkthrough.json(Walkthrough.redacted($0)) } ?? "")"
                    + (apiKey == nil ? "" : "  [X-API-Key]"))
            let answer = try await http(method, url, body, apiKey)
            let received = (try? JSONSerialization.jsonObject(with: answer.body) as? [String: any Sendable]) ?? [:]
            print("    <- \(answer.status) \(Walkthrough.json(Walkthrough.redacted(received)))\n")
            return answer
        }
    }

    /// The requester's calls, printed.
    var transport: @Sendable (String, String, [String: any Sendable]?, String?) async throws -> (Int, [String: any Sendable]) {
        let base = base
        return { method, path, body, apiKey in
            print(
                "    \(method) \(path)\(body.map { " " + Walkthrough.json(Walkthrough.redacted($0)) } ?? "")\(apiKey == nil ? "" : "  [X-API-Key]")")
            let answer = try await jsonCall(base: base, method, path, body, apiKey: apiKey)
            print("    <- \(answer.status) \(Walkthrough.json(Walkthrough.redacted(answer.body)))\n")
            return answer
        }
    }

    private func step(_ text: String) {
        print("==> \(text)")
    }

    private func call(
        _ method: String,
        _ path: String,
        _ body: [String: any Sendable]? = nil,
        apiKey: String? = nil,
        quiet: Bool = false
    ) async throws -> [String: any Sendable] {
        if quiet { return try await jsonCall(base: base, method, path, body, apiKey: apiKey).body }
        return try await transport(method, path, body, apiKey).1
    }

    /// Passwords, keys and signatures are shortened in what the demo prints.
    static func redacted(_ object: [String: any Sendable]) -> [String: any Sendable] {
        object.reduce(into: [:]) { result, pair in
            switch pair.key {
            case "password", "newPassword": result[pair.key] = "••••••"
            case "apiKey", "signature": result[pair.key] = ((pair.value as? String)?.prefix(12)).map { "\($0)…" } ?? pair.value
            case "offline": result[pair.key] = ["secret": "•••• (kept by the phone)", "uri": "otpauth://totp/…"]
            default: result[pair.key] = pair.value
            }
        }
    }

    static func json(_ object: [String: any Sendable]) -> String {
        guard let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]) else { return "\(object)" }
        return String(decoding: data, as: UTF8.self)
    }
}

import Foundation
import Synchronization
import TestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// What the login integrations' tests share (login-integrations.md): the
/// built PAM module, a daemon with a user, a host's integration
/// (`--prompt-all-users`) and that user's phone (`device simulate`), PAM
/// service files, and the syslog lines the module writes.
struct LoginHost: Sendable {
    let folder: URL
    let daemon: RunningDaemon
    let database: String
    let email: String
    let integrationKey: String
    /// The integration key's file, mode 0600, as `integration_key_file` wants it.
    let keyFile: String
    /// The phone's credentials (`device simulate --key-file`).
    let phoneFile: String

    static let password = "correct horse battery"

    /// The PAM and SSH tests write `/etc/pam.d` and start `sshd`: they run as root, and elsewhere are
    /// skipped, except where `COUNTERSIGN_REQUIRE_LOGIN_TESTS` is set (CI): there they run and fail.
    static var runs: Bool { geteuid() == 0 || required }

    /// Set in CI: the login tests never skip, and their syslog checks never pass over a syslog not captured.
    static var required: Bool { ProcessInfo.processInfo.environment["COUNTERSIGN_REQUIRE_LOGIN_TESTS"] != nil }

    static var repository: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
    }

    /// A daemon on a fresh database in `folder`, `email` with a password and a phone, and the host's integration.
    static func start(_ folder: URL, email: String = "ana@example.com", extra: [String] = []) async throws -> LoginHost {
        let database = folder.appendingPathComponent("countersign.sqlite").path
        let added = try await DeviceSimulateTests.run(
            ["user", "add", email, "--database", database, "--bcrypt-cost", "4"], input: "\(password)\n")
        #expect(added.status == 0, "\(added.output)")
        let integration = try await DaemonProcessTests.command(["integration", "add", "host", "--prompt-all-users", "--database", database])
        let key = try #require(
            integration.output.split(separator: "\n").first { $0.hasPrefix("API key:") }.map {
                $0.dropFirst("API key:".count).trimmingCharacters(in: .whitespaces)
            }, "\(integration.output)")
        let keyFile = folder.appendingPathComponent("integration-key").path
        try writePrivate(keyFile, "\(key)\n")
        let daemon = try await RunningDaemon.start(["--database", database] + extra, log: folder.appendingPathComponent("daemon.log"))
        let phoneFile = folder.appendingPathComponent("phone.json").path
        let host = LoginHost(
            folder: folder, daemon: daemon, database: database, email: email, integrationKey: key, keyFile: keyFile, phoneFile: phoneFile)
        // The phone signs in once (the password on standard input); later runs use its key file.
        let signedIn = try await DeviceSimulateTests.run(
            ["device", "simulate", "--url", daemon.base, "--email", email, "--key-file", phoneFile, "--approve-all", "--seconds", "1"],
            input: "\(password)\n")
        #expect(signedIn.status == 0, "\(signedIn.output)")
        return host
    }

    /// A file only root may read, as the module requires of its configuration and key.
    static func writePrivate(_ path: String, _ text: String, mode: mode_t = 0o600) throws {
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
        #expect(chmod(path, mode) == 0)
    }

    /// `/etc/countersign/pam.conf`'s lines, in the test's folder.
    func writeConf(_ name: String = "pam.conf", url: String? = nil, lines: [String] = [], mode: mode_t = 0o600) throws -> String {
        let path = folder.appendingPathComponent(name).path
        let text = (["url = \(url ?? daemon.base)", "integration_key_file = \(keyFile)", "timeout = 30"] + lines).joined(separator: "\n")
        try Self.writePrivate(path, text + "\n", mode: mode)
        return path
    }

    /// The phone approves one prompt, matching `number` when the terminal showed one.
    func approve(number: String?) async throws -> String {
        var arguments = ["device", "simulate", "--url", daemon.base, "--key-file", phoneFile, "--approve-all", "--count", "1", "--seconds", "30"]
        if let number { arguments += ["--number-code", number] }
        let (status, output) = try await DeviceSimulateTests.run(arguments, input: "")
        #expect(status == 0, "\(output)")
        return output
    }

    func deny() async throws {
        let (status, output) = try await DeviceSimulateTests.run(
            ["device", "simulate", "--url", daemon.base, "--key-file", phoneFile, "--deny-all", "--count", "1", "--seconds", "30"], input: "")
        #expect(status == 0, "\(output)")
    }

    /// The offline code an authenticator shows now, computed by pyotp (code no one here wrote) from the
    /// secret the daemon gave the phone at sign-in, as kept in its key file.
    func offlineCode() async throws -> String {
        let file = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: phoneFile))) as? [String: Any]
        let credentials = file?["credentials"] as? [String: Any]
        let secret = try #require(credentials?["offlineSecret"] as? String, "the phone has no offline secret")
        let uri = "otpauth://totp/Countersign:\(email)?secret=\(secret)&issuer=Countersign"
        let code = try await OfflineCodeProcessTests.pyotp(uri: uri)
        #expect(code.wholeMatch(of: /\d{6}/) != nil, "pyotp: \(code)")
        return code
    }

    /// `count` bypass codes issued for the user now (`countersign user bypass-codes`), as printed.
    func bypassCodes(count: Int) async throws -> [String] {
        let (status, output) = try await DaemonProcessTests.command(
            ["user", "bypass-codes", email, "--database", database, "--count", String(count)])
        #expect(status == 0, "\(output)")
        return output.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.filter {
            $0.wholeMatch(of: /[0-9]{5}-[0-9]{5}/) != nil
        }
    }

    /// The audit rows of `kind` (`countersign audit --kind KIND --json`), waiting up to `limit` for at least `count`.
    func audit(_ kind: String, atLeast count: Int = 1, within limit: Duration = .seconds(30)) async throws -> [[String: String]] {
        let clock = ContinuousClock()
        let start = clock.now
        while true {
            let (_, lines) = try await DeviceSimulateTests.run(["audit", "--database", database, "--kind", kind, "--json"], input: "")
            let rows = lines.split(separator: "\n").compactMap { line in
                (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: String]
            }
            if rows.count >= count || clock.now - start > limit { return rows }
            try await Task.sleep(for: .milliseconds(100))
        }
    }
}

/// Starts `program` with its output in `log`, and returns once the log says `ready`
/// (the bound turns a server that never starts into a failure naming its log).
func startServer(_ program: String, _ arguments: [String], log: URL, ready: String) async throws -> TiedProcess {
    FileManager.default.createFile(atPath: log.path, contents: nil)
    let handle = try FileHandle(forWritingTo: log)
    defer { try? handle.close() }
    let process = try TiedProcess(URL(fileURLWithPath: program), arguments, output: handle)
    let clock = ContinuousClock()
    let start = clock.now
    while clock.now - start < .seconds(60) {
        if ((try? String(contentsOf: log, encoding: .utf8)) ?? "").contains(ready) { return process }
        guard process.isRunning else { break }
        try await Task.sleep(for: .milliseconds(20))
    }
    process.stop()
    throw RunError("\(program) did not start: \((try? String(contentsOf: log, encoding: .utf8)) ?? "")")
}

/// `pam_countersign.so`, built once per test process by `scripts/build-pam.sh`.
enum PAMModule {
    private static let built = Mutex<String?>(nil)

    static func path() async throws -> String {
        if let path = built.withLock({ $0 }) { return path }
        let folder = try makeTemporaryFolder("countersign-pam")
        let script = LoginHost.repository.appendingPathComponent("scripts/build-pam.sh").path
        let (status, output) = try await onOwnThread { try runToEnd("/bin/bash", [script, folder.path]) }
        #expect(status == 0, "\(output)")
        let path = folder.appendingPathComponent("pam_countersign.so").path
        guard status == 0 else { throw RunError("the PAM module did not build: \(output)") }
        return built.withLock { built in
            if built == nil { built = path }
            return built!
        }
    }
}

/// A PAM service file in `/etc/pam.d` (where PAM reads them), removed by `remove()`.
struct PAMService {
    let name: String

    init(auth lines: [String], name: String = "countersign-test-\(UUID().uuidString.prefix(8).lowercased())") throws {
        self.name = name
        let text = (lines + ["account required pam_permit.so", "session required pam_permit.so"]).joined(separator: "\n") + "\n"
        try Data(text.utf8).write(to: URL(fileURLWithPath: "/etc/pam.d/\(name)"))
    }

    func remove() { unlink("/etc/pam.d/\(name)") }
}

/// A `pamtester` run: `answers` are what the user types, one per line, from a file.
struct PAMTesterRun {
    let process: TiedProcess
    let output: URL

    /// `items` are PAM items as the login's program would set them (`rhost=203.0.113.5`, `tty=pts/1`, `ruser=bob`).
    /// `environment` holds `NAME=value` settings added to pamtester's environment.
    init(service: String, user: String, answers: String, items: [String] = [], environment: [String] = [], folder: URL) throws {
        let input = folder.appendingPathComponent("pamtester-\(UUID().uuidString).in")
        output = folder.appendingPathComponent("pamtester-\(UUID().uuidString).out")
        try Data(answers.utf8).write(to: input)
        // Line-buffered, so that what the terminal shows is in the file as it is shown.
        let command =
            "exec env \(environment.map(shellQuoted).joined(separator: " ")) stdbuf -oL pamtester -v \(items.map { "-I \(shellQuoted($0))" }.joined(separator: " ")) \(shellQuoted(service)) \(shellQuoted(user)) authenticate <\(shellQuoted(input.path)) >\(shellQuoted(output.path)) 2>&1"
        process = try TiedProcess(URL(fileURLWithPath: "/bin/sh"), ["-c", command])
    }

    var text: String { (try? String(contentsOf: output, encoding: .utf8)) ?? "" }

    /// The number the terminal showed ("Approve on your phone: 42"), once it did.
    func number(within limit: Duration = .seconds(30)) async throws -> String {
        let clock = ContinuousClock()
        let start = clock.now
        while clock.now - start < limit {
            if let match = text.firstMatch(of: /Approve on your phone: (\d+)/) { return String(match.1) }
            guard process.isRunning else { break }
            try await Task.sleep(for: .milliseconds(50))
        }
        throw RunError("no number on the terminal: \(text)")
    }

    /// Waits for pamtester to end; its exit status (128 + N for signal N) and output.
    func finish(within limit: Duration = .seconds(90)) async throws -> (status: Int32, output: String) {
        #expect(try await process.exit(within: limit), "pamtester still running: \(text)")
        let status = process.terminationReason == .exit ? process.terminationStatus : 128 + process.terminationStatus
        return (status, text)
    }

    /// Runs to its end without anyone answering on the phone.
    static func run(
        service: String, user: String, answers: String = "\n", items: [String] = [], folder: URL
    ) async throws -> (status: Int32, output: String) {
        try await PAMTesterRun(service: service, user: user, answers: answers, items: items, folder: folder).finish()
    }
}

/// The syslog lines written while a test runs: a listener on `/dev/log`
/// when no syslog daemon holds it (as on a build machine). `nil` when one does.
final class SyslogCapture: Sendable {
    let file: URL
    let process: TiedProcess

    static let script = #"""
        import os, signal, socket, sys
        path = "/dev/log"
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        try:
            probe.connect(path)
            sys.exit(3)  # a syslog daemon is there
        except FileNotFoundError:
            pass
        except ConnectionRefusedError:
            os.unlink(path)  # left by an earlier run
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        listener.bind(path)
        os.chmod(path, 0o666)
        def done(*_):
            os.unlink(path)
            sys.exit(0)
        signal.signal(signal.SIGTERM, done)
        out = open(sys.argv[1], "ab", buffering=0)
        open(sys.argv[2], "w").close()
        while True:
            out.write(listener.recv(65536).rstrip(b"\n") + b"\n")
        """#

    private init(file: URL, process: TiedProcess) {
        self.file = file
        self.process = process
    }

    static func start(in folder: URL) async throws -> SyslogCapture? {
        let file = folder.appendingPathComponent("syslog")
        let ready = folder.appendingPathComponent("syslog.ready")
        let process = try TiedProcess(URL(fileURLWithPath: "/usr/bin/python3"), ["-c", script, file.path, ready.path])
        let clock = ContinuousClock()
        let start = clock.now
        while clock.now - start < .seconds(20) {
            if FileManager.default.fileExists(atPath: ready.path) { return SyslogCapture(file: file, process: process) }
            if !process.isRunning { return nil }
            try await Task.sleep(for: .milliseconds(20))
        }
        process.stop()
        return nil
    }

    var lines: [String] { ((try? String(contentsOf: file, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init) }

    /// The lines, once `arrived` holds for them. A module sends its line before its login ends,
    /// but the capture writes it only when it reads it, which on a loaded machine can lag the
    /// login; the bound is a hang detector (the lines are returned as they are then).
    func lines(once arrived: ([String]) -> Bool) async throws -> [String] {
        let clock = ContinuousClock()
        let start = clock.now
        while !arrived(lines), clock.now - start < .seconds(10) { try await Task.sleep(for: .milliseconds(20)) }
        return lines
    }

    func stop() {
        process.signal(SIGTERM)
        process.waitUntilExit()
    }
}

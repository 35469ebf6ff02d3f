import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// login-integrations.md, "PAM", with the real machinery: OpenSSH's `sshd` on
/// loopback (`UsePAM yes`, keyboard-interactive) with the built module, logged
/// into by OpenSSH's own `ssh` under a pseudo-terminal (its prompts answered
/// as a person at the terminal answers them), approved by the phone or a
/// typed offline code; and `sshd` surviving a hostile server's answer.
@Suite(.serialized, .enabled(if: LoginHost.runs, "starts sshd and writes /etc/pam.d: run the suite as root")) struct SSHLoginTests {
    /// An `sshd` on 127.0.0.1 whose PAM service is the module alone (the
    /// first factor is left out here: the docs show it before the module).
    struct SSHServer {
        let process: TiedProcess
        let port: Int
        let service: PAMService
        let logFile: URL

        /// `scripts/loopback-sshd.sh` (what the demo runs too), under a name of its own: sshd names
        /// its PAM service after the name it was started by.
        static func start(folder: URL, conf: String, extra: [String] = []) async throws -> SSHServer {
            let module = try await PAMModule.path()
            let name = "countersign-sshd-\(UUID().uuidString.prefix(8).lowercased())"
            let service = try PAMService(auth: ["auth required \(module) conf=\(conf)"], name: name)
            let port = unusedPort()
            let script = LoginHost.repository.appendingPathComponent("scripts/loopback-sshd.sh").path
            let log = folder.appendingPathComponent("sshd-\(name).log")
            do {
                let process = try await startServer(
                    "/bin/bash", [script, folder.path, name, String(port)] + extra, log: log, ready: "Server listening")
                return SSHServer(process: process, port: port, service: service, logFile: log)
            } catch {
                service.remove()
                throw error
            }
        }

        func stop() {
            process.stop()
            service.remove()
        }

        /// What sshd logged so far (`-e`: its standard error), for a failure's message.
        var log: String { (try? String(contentsOf: logFile, encoding: .utf8)) ?? "" }
    }

    /// An `ssh root@127.0.0.1` under a pseudo-terminal (`scripts/pty-answer.py`), as a person at a
    /// terminal runs it: what the terminal shows is recorded, and `answer`'s lines are typed at its prompts
    /// (lines given later with `type(_:)` too).
    struct Login {
        let process: TiedProcess
        let transcript: URL
        let answers: URL

        init(port: Int, answer: String, folder: URL) throws {
            let id = UUID().uuidString
            transcript = folder.appendingPathComponent("terminal-\(id)")
            answers = folder.appendingPathComponent("answers-\(id)")
            try Data(answer.utf8).write(to: answers)
            let ssh = [
                "/usr/bin/ssh", "-F", "/dev/null", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o",
                "PreferredAuthentications=keyboard-interactive", "-o", "NumberOfPasswordPrompts=1", "-o", "ConnectTimeout=20", "-p", String(port),
                "root@127.0.0.1", "echo logged-in-as-$(id -un)",
            ]
            let script = LoginHost.repository.appendingPathComponent("scripts/pty-answer.py").path
            process = try TiedProcess(URL(fileURLWithPath: "/usr/bin/python3"), [script, transcript.path, answers.path, "--"] + ssh)
        }

        /// Waits until `count` answers were typed at the terminal's prompts; whether they were.
        func typed(_ count: Int) async throws -> Bool {
            let marks = transcript.path + ".typed"
            let clock = ContinuousClock()
            let start = clock.now
            while clock.now - start < .seconds(30) {
                let typed = ((try? String(contentsOfFile: marks, encoding: .utf8)) ?? "").split(separator: "\n").count
                if typed >= count { return true }
                guard process.isRunning else { return false }
                try await Task.sleep(for: .milliseconds(50))
            }
            return false
        }

        /// Gives `lines` (each ending in a line break) to type at the next prompts, after those given before.
        func type(_ lines: String) throws {
            let given = (try? Data(contentsOf: answers)) ?? Data()
            try (given + Data(lines.utf8)).write(to: answers, options: .atomic)
        }

        /// What the terminal showed so far.
        var prompted: String { (try? String(contentsOf: transcript, encoding: .utf8)) ?? "" }

        func number() async throws -> String {
            let clock = ContinuousClock()
            let start = clock.now
            while clock.now - start < .seconds(30) {
                if let match = prompted.firstMatch(of: /Approve on your phone: (\d+)/) { return String(match.1) }
                guard process.isRunning else { break }
                try await Task.sleep(for: .milliseconds(50))
            }
            throw RunError("no number in the prompt: \(prompted) \(text)")
        }

        var text: String { prompted }

        func finish() async throws -> (status: Int32, output: String) {
            #expect(try await process.exit(within: .seconds(90)), "ssh still running: \(text)")
            return (process.terminationStatus, text)
        }
    }

    @Test func anSSHLoginIsApprovedOnThePhoneOrWithATypedOfflineCode() async throws {
        try await withTemporaryDirectory("countersign-ssh") { folder in
            let host = try await LoginHost.start(folder, email: "root@example.com")
            defer { host.daemon.stop() }
            let conf = try host.writeConf(lines: ["user_map = %u@example.com"])
            let sshd = try await SSHServer.start(folder: folder, conf: conf)
            defer { sshd.stop() }

            // Enter at the prompt: the phone answers, matching the number the prompt showed.
            let pushed = try Login(port: sshd.port, answer: "\n", folder: folder)
            let number = try await pushed.number()
            #expect(pushed.prompted.contains("Or type a code from your phone"))
            _ = try await host.approve(number: number)
            let (status, output) = try await pushed.finish()
            #expect(status == 0, "\(output)")
            #expect(output.contains("logged-in-as-root"), "\(output)")
            let created = try await host.audit("request_created")
            // The action is the PAM service's name (`sshd`'s is `ssh-login`; this one's is its own).
            #expect(created.first?["detail"]?.contains("action \(sshd.service.name)") == true, "\(created)")

            // The phone offline: its code, read off it once the prompt shows, typed at the prompt
            // (pyotp's Python made ready first: on a new checkout that takes longer than the prompt waits).
            _ = try await TestPython.path()
            let typed = try Login(port: sshd.port, answer: "", folder: folder)
            _ = try await typed.number()
            let code = try await host.offlineCode()
            try typed.type("\(code)\n")
            let (typedStatus, typedOutput) = try await typed.finish()
            #expect(typedStatus == 0, "\(typedOutput)")
            #expect(typedOutput.contains("logged-in-as-root"), "\(typedOutput)")
            #expect(try await host.audit("completed", atLeast: 2).count == 2)
            #expect(!typed.prompted.contains(code) && !typedOutput.contains(code))

            // A denial: no shell.
            let denied = try Login(port: sshd.port, answer: "\n", folder: folder)
            _ = try await denied.number()
            try await host.deny()
            let (deniedStatus, deniedOutput) = try await denied.finish()
            #expect(deniedStatus != 0, "\(deniedOutput)")
            #expect(!deniedOutput.contains("logged-in-as"), "\(deniedOutput)")
        }
    }

    @Test func sshdSurvivesAHostileServerAndAnswersTheNextLogin() async throws {
        try await withTemporaryDirectory("countersign-ssh") { folder in
            let host = try await LoginHost.start(folder, email: "root@example.com")
            defer { host.daemon.stop() }
            let server = try await HostileServer.start(in: folder)
            defer { server.stop() }
            let conf = try host.writeConf(url: "\(server.base)/oversized", lines: ["user_map = %u@example.com"])
            let sshd = try await SSHServer.start(folder: folder, conf: conf)
            defer { sshd.stop() }

            for mode in ["oversized", "deep", "truncated", "notjson", "statusgarbage"] {
                _ = try host.writeConf(url: "\(server.base)/\(mode)", lines: ["user_map = %u@example.com"])
                let (status, output) = try await Login(port: sshd.port, answer: "\n", folder: folder).finish()
                #expect(status != 0, "\(mode): \(output)")
                #expect(!output.contains("logged-in-as"), "\(mode): \(output)")
                #expect(sshd.process.isRunning, "sshd still runs after \(mode)")
            }
            #expect(server.requests.count >= 5, "\(server.requests)")

            // The same sshd, the module now pointed at the daemon: the next login is approved.
            _ = try host.writeConf(lines: ["user_map = %u@example.com"])
            let next = try Login(port: sshd.port, answer: "\n", folder: folder)
            _ = try await host.approve(number: try await next.number())
            let (status, output) = try await next.finish()
            #expect(status == 0, "\(output)")
            #expect(output.contains("logged-in-as-root"), "\(output)")
        }
    }

    /// sshd ends a login whose client is gone when its grace time passes (it does not
    /// look while PAM waits). Ended while the module waits for the phone, the module
    /// cancels the approval; ended at the code prompt, sshd's PAM child ends with it
    /// (sshd's own SIGTERM, not held by the module), and the approval is left to its ttl.
    @Test func aLoginSSHDEndsCancelsItsApprovalAndNeverHangsSSHD() async throws {
        try await withTemporaryDirectory("countersign-ssh") { folder in
            let host = try await LoginHost.start(folder, email: "root@example.com")
            defer { host.daemon.stop() }
            let conf = try host.writeConf(lines: ["user_map = %u@example.com", "timeout = 120"])
            // The grace time counts from the connection: long enough that a loaded machine reaches the
            // module's wait for the phone within it (at 4 s, a run under load met it at the prompt).
            let sshd = try await SSHServer.start(folder: folder, conf: conf, extra: ["LoginGraceTime 15"])
            defer { sshd.stop() }
            let login = try Login(port: sshd.port, answer: "\n", folder: folder)
            _ = try await login.number()
            #expect(try await login.typed(1), "Enter typed at the prompt")
            // The module's long poll parked on the daemon: it waits for the phone now, past the prompt.
            try await DaemonProcessTests.waitForLongPolls(1, metrics: host.daemon.metricsBase)
            login.process.stop()
            let cancelled = try await host.audit("cancelled", within: .seconds(60))
            #expect(cancelled.count == 1, "the approval is cancelled once sshd ends the login: \(cancelled)\n\(sshd.log)")
            #expect(try await Self.connectionsEnd(of: sshd), "sshd's processes for the login are gone")

            // The client gone while the prompt waits for a code: nothing typed.
            let atPrompt = try Login(port: sshd.port, answer: "", folder: folder)
            _ = try await atPrompt.number()
            atPrompt.process.stop()
            #expect(try await Self.connectionsEnd(of: sshd), "sshd's processes for the login at the prompt end at LoginGraceTime")
            #expect(sshd.process.isRunning)
            #expect(try await host.audit("completed", atLeast: 0, within: .zero).isEmpty)
        }
    }

    /// Whether the sshd processes of its logins (`NAME: root [priv]`, `[pam]`, `[net]`; not the listener)
    /// have all ended, within a minute.
    static func connectionsEnd(of sshd: SSHServer) async throws -> Bool {
        let clock = ContinuousClock()
        let start = clock.now
        while clock.now - start < .seconds(60) {
            let (_, found) = try await onOwnThread { try runToEnd("/usr/bin/pgrep", ["-a", "-f", "^\(sshd.service.name): "]) }
            if !found.split(separator: "\n").contains(where: { !$0.contains("[listener]") }) { return true }
            try await Task.sleep(for: .milliseconds(200))
        }
        return false
    }
}

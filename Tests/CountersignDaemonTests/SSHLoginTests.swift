import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// login-integrations.md, "PAM", with the real machinery: OpenSSH's `sshd` on
/// loopback (`UsePAM yes`, keyboard-interactive) with the built module, logged
/// into by OpenSSH's own `ssh` (its prompts answered through `SSH_ASKPASS`,
/// as a person at a terminal would answer them), approved by the phone or a
/// typed offline code; and `sshd` surviving a hostile server's answer.
@Suite(.serialized, .enabled(if: LoginHost.isRoot, "starts sshd and writes /etc/pam.d: run the suite as root")) struct SSHLoginTests {
    /// An `sshd` on 127.0.0.1 whose PAM service is the module alone (the
    /// first factor is left out here: the docs show it before the module).
    struct SSHServer {
        let process: TiedProcess
        let port: Int
        let service: PAMService

        /// `scripts/loopback-sshd.sh` (what the demo runs too), under a name of its own: sshd names
        /// its PAM service after the name it was started by.
        static func start(folder: URL, conf: String, extra: [String] = []) async throws -> SSHServer {
            let module = try await PAMModule.path()
            let name = "countersign-sshd-\(UUID().uuidString.prefix(8).lowercased())"
            let service = try PAMService(auth: ["auth required \(module) conf=\(conf)"], name: name)
            let port = unusedPort()
            let script = LoginHost.repository.appendingPathComponent("scripts/loopback-sshd.sh").path
            do {
                let process = try await startServer(
                    "/bin/bash", [script, folder.path, name, String(port)] + extra, log: folder.appendingPathComponent("sshd.log"),
                    ready: "Server listening")
                return SSHServer(process: process, port: port, service: service)
            } catch {
                service.remove()
                throw error
            }
        }

        func stop() {
            process.stop()
            service.remove()
        }
    }

    /// An `ssh root@127.0.0.1` whose keyboard-interactive prompts go to an askpass
    /// program: it records each prompt (what the terminal would show) and types `answer`.
    struct Login {
        let process: TiedProcess
        let prompts: URL
        let output: URL

        init(port: Int, answer: String, folder: URL) throws {
            let id = UUID().uuidString
            prompts = folder.appendingPathComponent("prompts-\(id)")
            output = folder.appendingPathComponent("ssh-\(id).out")
            let answerFile = folder.appendingPathComponent("answer-\(id)")
            try Data(answer.utf8).write(to: answerFile)
            let askpass = folder.appendingPathComponent("askpass-\(id)")
            try Data("#!/bin/sh\nprintf '%s\\n' \"$1\" >>\(shellQuoted(prompts.path))\ncat \(shellQuoted(answerFile.path))\n".utf8).write(to: askpass)
            #expect(chmod(askpass.path, 0o700) == 0)
            let command = [
                "/usr/bin/ssh", "-F", "/dev/null", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o",
                "PreferredAuthentications=keyboard-interactive", "-o", "NumberOfPasswordPrompts=1", "-o", "ConnectTimeout=20", "-p", String(port),
                "root@127.0.0.1",
                "echo logged-in-as-$(id -un)",
            ].map(shellQuoted).joined(separator: " ")
            var environment = ProcessInfo.processInfo.environment
            environment["SSH_ASKPASS"] = askpass.path
            environment["SSH_ASKPASS_REQUIRE"] = "force"
            process = try TiedProcess(
                URL(fileURLWithPath: "/bin/sh"), ["-c", "exec \(command) >\(shellQuoted(output.path)) 2>&1"], environment: environment)
        }

        var prompted: String { (try? String(contentsOf: prompts, encoding: .utf8)) ?? "" }

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

        var text: String { (try? String(contentsOf: output, encoding: .utf8)) ?? "" }

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

            // The phone offline: its code typed at the prompt.
            let code = try await host.offlineCode()
            let typed = try Login(port: sshd.port, answer: "\(code)\n", folder: folder)
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
    /// look while PAM waits); the module, ended by sshd, cancels the approval.
    @Test func aLoginSSHDEndsCancelsItsApproval() async throws {
        try await withTemporaryDirectory("countersign-ssh") { folder in
            let host = try await LoginHost.start(folder, email: "root@example.com")
            defer { host.daemon.stop() }
            let conf = try host.writeConf(lines: ["user_map = %u@example.com", "timeout = 120"])
            let sshd = try await SSHServer.start(folder: folder, conf: conf, extra: ["LoginGraceTime 4"])
            defer { sshd.stop() }
            let login = try Login(port: sshd.port, answer: "\n", folder: folder)
            _ = try await login.number()
            login.process.stop()
            let cancelled = try await host.audit("cancelled", within: .seconds(60))
            #expect(cancelled.count == 1, "the approval is cancelled once sshd ends the login: \(cancelled)")
        }
    }
}

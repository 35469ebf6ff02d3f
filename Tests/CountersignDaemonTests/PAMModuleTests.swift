import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// login-integrations.md, "PAM": the built `pam_countersign.so` loaded by
/// Debian's `pamtester` through a PAM service file, against the real daemon
/// and its phone (`device simulate`), and against a hostile server. One at a
/// time: they share `/etc/pam.d` and `/dev/log`.
@Suite(.serialized, .enabled(if: LoginHost.runs, "writes /etc/pam.d: run the suite as root")) struct PAMModuleTests {
    /// A host with a daemon, a PAM service naming the built module with `conf`'s lines, and the syslog capture.
    /// `control` is the module line's PAM control (`required`, or a bracketed one).
    static func withService(
        lines: [String] = [], control: String = "required", authAfter: [String] = [],
        _ body: (LoginHost, PAMService, SyslogCapture?) async throws -> Void
    ) async throws {
        try await withTemporaryDirectory("countersign-pam") { folder in
            let module = try await PAMModule.path()
            let host = try await LoginHost.start(folder)
            defer { host.daemon.stop() }
            let conf = try host.writeConf(lines: ["user_map = %u@example.com"] + lines)
            let service = try PAMService(auth: ["auth \(control) \(module) conf=\(conf)"] + authAfter)
            defer { service.remove() }
            let syslog = try await SyslogCapture.start(in: folder)
            defer { syslog?.stop() }
            if LoginHost.required { #expect(syslog != nil, "a syslog daemon holds /dev/log: the module's lines cannot be checked") }
            try await body(host, service, syslog)
        }
    }

    /// The module's decision lines in syslog (`pam_countersign(SERVICE:auth): user=…`; its
    /// configuration errors are lines of their own); checked only where no syslog daemon holds /dev/log.
    /// The module's decision lines, once `count` of them have arrived; `nil` without a capture.
    static func decisions(_ syslog: SyslogCapture?, _ service: PAMService, count: Int) async throws -> [String]? {
        let decision = { (line: String) in line.contains("pam_countersign(\(service.name):auth): user=") }
        return try await syslog?.lines { $0.filter(decision).count >= count }.filter(decision)
    }

    /// Nothing secret in what the terminal and syslog showed.
    static func expectNoSecret(_ texts: [String], host: LoginHost, code: String? = nil) {
        for text in texts {
            #expect(!text.contains(host.integrationKey), "the integration key leaked: \(text)")
            #expect(!text.contains(LoginHost.password))
            if let code { #expect(!text.contains(code), "the typed code leaked: \(text)") }
        }
    }

    @Test func theNumberIsShownAndTheLoginIsApprovedOnThePhone() async throws {
        try await Self.withService { host, service, syslog in
            let run = try PAMTesterRun(service: service.name, user: "ana", answers: "\n", folder: host.folder)
            let number = try await run.number()
            let phone = try await host.approve(number: number)
            #expect(phone.contains("approve → approved"), "\(phone)")
            let (status, output) = try await run.finish()
            #expect(status == 0, "\(output)")
            #expect(output.contains("successfully authenticated"))
            // Used once: the login completed its approval.
            let completed = try await host.audit("completed")
            #expect(completed.count == 1)
            let created = try await host.audit("request_created")
            #expect(created.first?["detail"]?.contains("action \(service.name)") == true, "\(created)")
            if let lines = try await Self.decisions(syslog, service, count: 1) {
                #expect(lines.count == 1, "one line per decision: \(lines)")
                let line = try #require(lines.first)
                #expect(line.hasPrefix("<85>"), "authpriv, notice: \(line)")
                #expect(line.contains("user=ana service=\(service.name) result=approved via=push approval=\(completed[0]["request"] ?? "?")"))
                Self.expectNoSecret(lines + [output], host: host)
            }
        }
    }

    @Test func aDenialOnThePhoneRefusesTheLoginWithItsReason() async throws {
        try await Self.withService { host, service, syslog in
            let run = try PAMTesterRun(service: service.name, user: "ana", answers: "\n", folder: host.folder)
            _ = try await run.number()
            try await host.deny()
            let (status, output) = try await run.finish()
            #expect(status != 0, "\(output)")
            #expect(output.contains("Login refused: denied on the phone."), "\(output)")
            #expect(try await host.audit("completed", atLeast: 0, within: .zero).isEmpty)
            if let lines = try await Self.decisions(syslog, service, count: 1) {
                #expect(lines.count == 1 && lines[0].contains("result=refused reason=\"denied on the phone\""), "\(lines)")
            }
        }
    }

    @Test func aTypedOfflineCodeApprovesAndWrongCodesEndTheLogin() async throws {
        try await Self.withService { host, service, syslog in
            let code = try await host.offlineCode()
            let (status, output) = try await PAMTesterRun.run(service: service.name, user: "ana", answers: "\(code)\n", folder: host.folder)
            #expect(status == 0, "\(output)")
            #expect(output.contains("successfully authenticated"))
            #expect(try await host.audit("completed").count == 1)

            // Three wrong codes (one not a code at all): refused, and the approval is cancelled.
            let (refused, refusal) = try await PAMTesterRun.run(
                service: service.name, user: "ana", answers: "111111\n12345-00000\nabc\n", folder: host.folder)
            #expect(refused != 0, "\(refusal)")
            #expect(refusal.components(separatedBy: "That code is not valid.").count == 3, "\(refusal)")
            #expect(refusal.contains("A code is 6 digits"))
            #expect(refusal.contains("Login refused: too many wrong codes."))
            #expect(try await host.audit("cancelled").count == 1)
            if let lines = try await Self.decisions(syslog, service, count: 2) {
                #expect(lines.count == 2, "\(lines)")
                #expect(lines.first?.contains("result=approved via=code") == true, "\(lines)")
                Self.expectNoSecret(lines + [output, refusal], host: host, code: code)
            }
        }
    }

    @Test func anInterruptedLoginCancelsItsApproval() async throws {
        try await Self.withService { host, service, syslog in
            let run = try PAMTesterRun(service: service.name, user: "ana", answers: "\n", folder: host.folder)
            _ = try await run.number()
            try await Task.sleep(for: .milliseconds(300))
            run.process.signal(SIGINT)
            let (status, output) = try await run.finish()
            #expect(status != 0, "\(output)")
            let cancelled = try await host.audit("cancelled")
            #expect(cancelled.count == 1, "the approval is cancelled: \(cancelled)")
            if let lines = try await Self.decisions(syslog, service, count: 1) {
                #expect(lines.contains { $0.contains("result=interrupted") }, "\(lines)")
            }
        }
    }

    @Test func failmodeDecidesWhenTheDaemonIsDown() async throws {
        try await Self.withService { host, service, syslog in
            host.daemon.stop()
            let (secure, refusal) = try await PAMTesterRun.run(service: service.name, user: "ana", folder: host.folder)
            #expect(secure != 0, "secure by default: \(refusal)")
            #expect(refusal.contains("Login refused: the approval service is unavailable."), "\(refusal)")

            _ = try host.writeConf(lines: ["user_map = %u@example.com", "failmode = safe"])
            let (safe, allowed) = try await PAMTesterRun.run(service: service.name, user: "ana", folder: host.folder)
            #expect(safe == 0, "failmode safe lets the login through: \(allowed)")
            if let lines = try await Self.decisions(syslog, service, count: 2) {
                #expect(lines.count == 2, "\(lines)")
                #expect(lines.first?.contains("result=refused reason=daemon-unavailable error=\"Couldn't connect to server\"") == true, "\(lines)")
                #expect(lines.last?.hasPrefix("<84>") == true, "a warning: \(lines)")
                #expect(lines.last?.contains("result=allowed reason=daemon-unavailable failmode=safe") == true, "\(lines)")
            }
        }
    }

    @Test func aConfigurationOthersCanReadIsRefusedWhateverItsFailmode() async throws {
        try await Self.withService { host, service, syslog in
            _ = try host.writeConf(lines: ["user_map = %u@example.com", "failmode = safe"], mode: 0o644)
            let (status, output) = try await PAMTesterRun.run(service: service.name, user: "ana", folder: host.folder)
            #expect(status != 0, "\(output)")
            #expect(try await host.audit("request_created", atLeast: 0, within: .zero).isEmpty, "nothing was asked")
            // The key file too.
            _ = try host.writeConf(lines: ["user_map = %u@example.com", "failmode = safe"])
            #expect(chmod(host.keyFile, 0o640) == 0)
            let (keyStatus, keyOutput) = try await PAMTesterRun.run(service: service.name, user: "ana", folder: host.folder)
            #expect(keyStatus != 0, "\(keyOutput)")
            if let lines = try await syslog?.lines(once: { $0.contains { $0.contains("refusing integration key file") } }) {
                #expect(lines.contains { $0.contains("refusing configuration") && $0.contains("must be owned by root and not readable") }, "\(lines)")
                #expect(lines.contains { $0.contains("refusing integration key file") }, "\(lines)")
            }
        }
    }

    /// The module's PAM_IGNORE, told apart from PAM_SUCCESS: a success would fail this stack (`success=bad`).
    static let ignoreOnly = "[success=bad ignore=ignore default=die]"

    @Test func aUserCountersignDoesNotKnowIsUnknownOrLeftToTheNextModule() async throws {
        try await Self.withService(control: Self.ignoreOnly, authAfter: ["auth required pam_permit.so"]) { host, service, _ in
            let (status, output) = try await PAMTesterRun.run(service: service.name, user: "nobody", folder: host.folder)
            #expect(status != 0)
            #expect(output.contains("User not known to the underlying authentication module"), "\(output)")
            _ = try host.writeConf(lines: ["user_map = %u@example.com", "unknown_users = ignore"])
            let (ignored, ignoredOutput) = try await PAMTesterRun.run(service: service.name, user: "nobody", folder: host.folder)
            #expect(ignored == 0, "ignored, and the next module (pam_permit) decides: \(ignoredOutput)")
            // ana is known: ignore does not let her in without the phone.
            let (ana, anaOutput) = try await PAMTesterRun.run(
                service: service.name, user: "ana", answers: "000000\n000000\n000000\n", folder: host.folder)
            #expect(ana != 0, "\(anaOutput)")
        }
    }

    @Test func groupsApplyTheModuleToTheirMembersOnly() async throws {
        try await Self.withService(lines: ["groups = root"], control: Self.ignoreOnly, authAfter: ["auth required pam_permit.so"]) {
            host, service, syslog in
            // daemon (uid 1) is not in group root on Debian: passed through to the next module.
            let (other, otherOutput) = try await PAMTesterRun.run(service: service.name, user: "daemon", folder: host.folder)
            #expect(other == 0, "\(otherOutput)")
            #expect(!otherOutput.contains("Approve on your phone"))
            // root is: Countersign is asked, and knows no root@example.com.
            let (root, rootOutput) = try await PAMTesterRun.run(service: service.name, user: "root", folder: host.folder)
            #expect(root != 0, "\(rootOutput)")
            #expect(rootOutput.contains("User not known to the underlying authentication module"), "\(rootOutput)")
            if let lines = try await Self.decisions(syslog, service, count: 1) {
                #expect(lines.first?.contains("user=daemon service=\(service.name) result=ignored reason=not-in-groups") == true, "\(lines)")
            }
        }
    }

    /// failmode safe lets a login through only while the approval is asked for: a server
    /// that makes one and then answers garbage refuses the login.
    @Test func failmodeSafeDoesNotOutliveTheApprovalsCreation() async throws {
        try await Self.withService { host, service, _ in
            let server = try await HostileServer.start(in: host.folder)
            defer { server.stop() }
            _ = try host.writeConf(url: "\(server.base)/statusgarbage", lines: ["user_map = %u@example.com", "failmode = safe", "timeout = 10"])
            let (status, output) = try await PAMTesterRun.run(service: service.name, user: "ana", folder: host.folder)
            #expect(status == 1, "\(output)")
            #expect(server.requests.contains { $0.hasPrefix("POST /statusgarbage/v1/approvals/") && $0.hasSuffix("/cancel") }, "\(server.requests)")
            // Before an approval exists, safe lets the login through.
            _ = try host.writeConf(url: "\(server.base)/notjson", lines: ["user_map = %u@example.com", "failmode = safe"])
            let (safe, allowed) = try await PAMTesterRun.run(service: service.name, user: "ana", folder: host.folder)
            #expect(safe == 0, "\(allowed)")
        }
    }

    @Test func aTypedBypassCodeApprovesOnceOnly() async throws {
        try await Self.withService { host, service, syslog in
            let code = try #require(try await host.bypassCodes(count: 1).first)
            let (status, output) = try await PAMTesterRun.run(service: service.name, user: "ana", answers: "\(code)\n", folder: host.folder)
            #expect(status == 0, "\(output)")
            let completed = try await host.audit("completed")
            #expect(completed.count == 1, "\(completed)")
            // Used: the same code again is a wrong code.
            let (again, refusal) = try await PAMTesterRun.run(
                service: service.name, user: "ana", answers: "\(code)\n\(code)\n\(code)\n", folder: host.folder)
            #expect(again != 0, "\(refusal)")
            #expect(refusal.contains("That code is not valid."), "\(refusal)")
            if let lines = try await Self.decisions(syslog, service, count: 2) {
                #expect(lines.first?.contains("result=approved via=code") == true, "\(lines)")
                Self.expectNoSecret(lines + [output, refusal], host: host, code: code)
                Self.expectNoSecret(lines, host: host, code: code.replacingOccurrences(of: "-", with: ""))
            }
        }
    }

    /// What the module asks for: an approval that lives as long as it waits (`timeout`), and the context the
    /// phone shows (host, service, account, the client's address as where the request came from, tty).
    /// A server that never answers is "unavailable": refused under secure, let through under safe.
    @Test func theApprovalAskedForCarriesTheLoginAndAServerThatNeverAnswersIsUnavailable() async throws {
        try await Self.withService { host, service, syslog in
            let server = try await HostileServer.start(in: host.folder)
            defer { server.stop() }
            _ = try host.writeConf(url: "\(server.base)/hang", lines: ["user_map = %u@example.com", "timeout = 45"])
            let items = ["rhost=203.0.113.5", "tty=pts/9", "ruser=bob"]
            let (secure, refusal) = try await PAMTesterRun.run(service: service.name, user: "ana", items: items, folder: host.folder)
            #expect(secure == 1, "\(refusal)")
            #expect(refusal.contains("Login refused: the approval service is unavailable."), "\(refusal)")

            let create = try #require(server.bodies.first { $0.hasPrefix("POST /hang/v1/approvals ") }, "\(server.bodies)")
            let body = try #require(
                try JSONSerialization.jsonObject(with: Data(create.dropFirst("POST /hang/v1/approvals ".count).utf8)) as? [String: Any])
            #expect(body["user"] as? String == "ana@example.com")
            #expect(body["action"] as? String == service.name, "neither sshd nor sudo: the service's own name")
            #expect(body["ttl"] as? Int == 45, "\(body)")
            let context = try #require(body["context"] as? [String: String], "\(body)")
            var name = [CChar](repeating: 0, count: 256)
            #expect(gethostname(&name, name.count) == 0)
            let hostName = String(decoding: name.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            #expect(context["host"] == hostName, "\(context)")
            #expect(context["service"] == service.name)
            #expect(context["account"] == "ana")
            #expect(context["remoteAddress"] == "203.0.113.5")
            #expect(context["ip"] == "203.0.113.5", "the phone shows the client's address, not this host's")
            #expect(context["tty"] == "pts/9")
            #expect(context["invokingUser"] == nil, "sudo's only")

            // failmode safe too: a create sent and not answered may have made an approval, and a user can
            // stop their own sudo (SIGSTOP) until any wait times out.
            _ = try host.writeConf(url: "\(server.base)/hang", lines: ["user_map = %u@example.com", "failmode = safe"])
            let (safe, refused) = try await PAMTesterRun.run(service: service.name, user: "ana", folder: host.folder)
            #expect(safe == 1, "\(refused)")
            if let lines = try await Self.decisions(syslog, service, count: 2) {
                #expect(lines.last?.contains("result=refused reason=daemon-unavailable error=\"Timeout was reached\"") == true, "\(lines)")
            }
        }
    }

    /// libcurl's setup opens the file `SSLKEYLOGFILE` names (to log TLS secrets); under `sudo -E` or `su` the
    /// user sets it while the module runs as root. The module's setup does not see it.
    @Test func theUsersSSLKeyLogFileIsNeitherCreatedNorWritten() async throws {
        try await Self.withService { host, service, _ in
            let keylog = host.folder.appendingPathComponent("keylog").path
            let run = try PAMTesterRun(
                service: service.name, user: "ana", answers: "\n", environment: ["SSLKEYLOGFILE=\(keylog)"], folder: host.folder)
            _ = try await host.approve(number: try await run.number())
            let (status, output) = try await run.finish()
            #expect(status == 0, "\(output)")
            #expect(!FileManager.default.fileExists(atPath: keylog), "the module's libcurl opened SSLKEYLOGFILE")
        }
    }

    /// Nobody answers on the phone: the login is refused when `timeout` ends, and the prompt does not outlive it.
    @Test func anUnansweredLoginEndsAtItsTimeout() async throws {
        try await Self.withService(lines: ["timeout = 10"]) { host, service, _ in
            let (status, output) = try await PAMTesterRun.run(service: service.name, user: "ana", folder: host.folder)
            #expect(status == 1, "\(output)")
            #expect(
                output.contains("Login refused: no answer from the phone in time.") || output.contains("Login refused: the approval expired."),
                "\(output)")
            // Cancelled by the module at its deadline, or expired by the daemon at the same moment (its ttl).
            var ended: [[String: String]] = []
            let clock = ContinuousClock()
            let start = clock.now
            while ended.isEmpty && clock.now - start < .seconds(30) {
                ended = try await host.audit("cancelled", atLeast: 0, within: .zero) + host.audit("expired", atLeast: 0, within: .zero)
                if ended.isEmpty { try await Task.sleep(for: .milliseconds(200)) }
            }
            #expect(ended.count == 1, "\(ended)")
            #expect(try await host.audit("completed", atLeast: 0, within: .zero).isEmpty)
        }
    }

    /// sshd's and sudo's own service names give the actions the phone shows (`ssh-login`, `sudo`), and sudo's
    /// invoking user. Run in a mount namespace of their own whose /etc/pam.d holds those two services:
    /// the machine's own /etc/pam.d/sshd and sudo are left alone.
    @Test func sshdAndSudoAreNamedAsThePhoneShowsThem() async throws {
        try await Self.withService { host, _, _ in
            let server = try await HostileServer.start(in: host.folder)
            defer { server.stop() }
            let conf = try host.writeConf(url: "\(server.base)/server-error", lines: ["user_map = %u@example.com"])
            let module = try await PAMModule.path()
            let pamd = host.folder.appendingPathComponent("pam.d")
            try FileManager.default.createDirectory(at: pamd, withIntermediateDirectories: true)
            for service in ["sshd", "sudo"] {
                try Data("auth required \(module) conf=\(conf)\naccount required pam_permit.so\n".utf8).write(
                    to: pamd.appendingPathComponent(service))
                let command =
                    "mount --bind \(shellQuoted(pamd.path)) /etc/pam.d && exec pamtester -v -I ruser=bob -I rhost=198.51.100.7 \(service) ana authenticate"
                let (status, output) = try await onOwnThread { try runToEnd("/usr/bin/unshare", ["-m", "/bin/sh", "-c", command]) }
                #expect(status == 1, "\(service): \(output)")
                #expect(output.contains("Login refused: the approval service is unavailable."), "\(service): \(output)")
            }
            let prefix = "POST /server-error/v1/approvals "
            let creates = try server.bodies.filter { $0.hasPrefix(prefix) }.map { line in
                try #require(try JSONSerialization.jsonObject(with: Data(line.dropFirst(prefix.count).utf8)) as? [String: Any])
            }
            try #require(creates.count == 2, "\(server.bodies)")
            let (ssh, sudo) = (creates[0], creates[1])
            #expect(ssh["action"] as? String == "ssh-login")
            #expect((ssh["title"] as? String)?.hasPrefix("SSH login to ") == true, "\(ssh)")
            #expect((ssh["context"] as? [String: String])?["service"] == "sshd")
            #expect((ssh["context"] as? [String: String])?["invokingUser"] == nil)
            #expect(sudo["action"] as? String == "sudo")
            #expect((sudo["title"] as? String)?.hasPrefix("sudo on ") == true, "\(sudo)")
            #expect((sudo["context"] as? [String: String])?["invokingUser"] == "bob", "\(sudo)")
            #expect((sudo["context"] as? [String: String])?["ip"] == "198.51.100.7")
        }
    }

    /// `codes = no` offers no code; with codes on, the end of input (nothing typed) means the phone; a `url`
    /// in plain http to anything but this machine is refused, nothing sent.
    @Test func codesOffTheEndOfInputAndAPlainURLElsewhereAreAsDocumented() async throws {
        try await Self.withService(lines: ["codes = no"]) { host, service, syslog in
            let quiet = try PAMTesterRun(service: service.name, user: "ana", answers: "", folder: host.folder)
            _ = try await host.approve(number: try await quiet.number())
            let (status, output) = try await quiet.finish()
            #expect(status == 0, "\(output)")
            #expect(!output.contains("Or type a code"), "\(output)")

            _ = try host.writeConf(lines: ["user_map = %u@example.com"])
            let ended = try PAMTesterRun(service: service.name, user: "ana", answers: "", folder: host.folder)
            _ = try await host.approve(number: try await ended.number())
            let (endedStatus, endedOutput) = try await ended.finish()
            #expect(endedStatus == 0, "the end of input waits for the phone: \(endedOutput)")
            #expect(endedOutput.contains("Or type a code"), "\(endedOutput)")

            _ = try host.writeConf(url: "http://192.0.2.1:8080", lines: ["user_map = %u@example.com", "failmode = safe"])
            let (plain, plainOutput) = try await PAMTesterRun.run(service: service.name, user: "ana", folder: host.folder)
            #expect(plain == 1, "refused whatever failmode says: \(plainOutput)")
            if let lines = try await syslog?.lines(once: { $0.contains { $0.contains("`url` must be https") } }) {
                #expect(lines.contains { $0.contains("`url` must be https, or http to 127.0.0.1") }, "\(lines)")
            }
        }
    }

    /// A login name chosen to look like log fields cannot forge one.
    @Test func aLoginNameCannotForgeALogField() async throws {
        try await Self.withService { host, service, syslog in
            let (status, _) = try await PAMTesterRun.run(service: service.name, user: "x result=approved via=push", folder: host.folder)
            #expect(status != 0)
            if let lines = try await Self.decisions(syslog, service, count: 1) {
                #expect(lines.count == 1, "\(lines)")
                #expect(lines.first?.contains("user=x?result?approved?via?push service=") == true, "\(lines)")
                #expect(lines.first?.contains(" result=approved") == false, "\(lines)")
            }
        }
    }

    /// A server answering oversized, truncated, non-JSON, too deep or ill-typed bodies:
    /// each login fails cleanly (pamtester exits with an authentication failure, no crash).
    @Test(arguments: [
        "oversized", "truncated", "notjson", "deep", "badid", "wrongtypes", "nul", "longnumber", "trailing", "statusgarbage",
        "statusoversized", "statuswrongtype", "server-error",
    ])
    func aHostileServerFailsTheLoginCleanly(mode: String) async throws {
        try await Self.withService { host, service, _ in
            let server = try await HostileServer.start(in: host.folder)
            defer { server.stop() }
            _ = try host.writeConf(url: "\(server.base)/\(mode)", lines: ["user_map = %u@example.com"])
            let (status, output) = try await PAMTesterRun.run(service: service.name, user: "ana", folder: host.folder)
            #expect(status == 1, "an authentication failure, not a crash: \(status) \(output)")
            #expect(output.contains("Login refused"), "\(output)")
            #expect(server.requests.first?.hasPrefix("POST /\(mode)/v1/approvals") == true, "\(server.requests)")
            #expect(!server.requests.contains { $0.contains("..") }, "an id is never put in a path unchecked: \(server.requests)")
        }
    }
}

/// `scripts/hostile-http.py` on a port of its own.
final class HostileServer: Sendable {
    let process: TiedProcess
    let port: Int
    let log: URL
    var base: String { "http://127.0.0.1:\(port)" }

    private init(process: TiedProcess, port: Int, log: URL) {
        self.process = process
        self.port = port
        self.log = log
    }

    static func start(in folder: URL) async throws -> HostileServer {
        let portFile = folder.appendingPathComponent("hostile.port")
        let log = folder.appendingPathComponent("hostile.log")
        let script = LoginHost.repository.appendingPathComponent("scripts/hostile-http.py").path
        let process = try TiedProcess(URL(fileURLWithPath: "/usr/bin/python3"), [script, portFile.path, log.path])
        let clock = ContinuousClock()
        let start = clock.now
        while clock.now - start < .seconds(30) {
            if let text = try? String(contentsOf: portFile, encoding: .utf8), let port = Int(text) {
                return HostileServer(process: process, port: port, log: log)
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        process.stop()
        throw RunError("the hostile server did not start")
    }

    var requests: [String] { ((try? String(contentsOf: log, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init) }

    /// Each request's method, path and body, a line each.
    var bodies: [String] {
        ((try? String(contentsOfFile: log.path + ".bodies", encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
    }

    func stop() { process.stop() }
}

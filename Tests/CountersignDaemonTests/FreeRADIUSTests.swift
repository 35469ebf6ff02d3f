import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// login-integrations.md, "RADIUS": Debian's FreeRADIUS (`freeradius -X`)
/// with the shipped site and rest module (packaging/freeradius) filled in,
/// in front of the real daemon, asked by Debian's `radclient` as a VPN
/// would: the password checked by FreeRADIUS, then the phone or a code.
@Suite struct FreeRADIUSTests {
    static let secret = "testing123"

    /// FreeRADIUS on 127.0.0.1 with a minimal radiusd.conf, `files` holding ana's password
    /// (the first factor), and the shipped Countersign files with their FILL IN lines filled.
    struct RADIUSServer {
        let process: TiedProcess
        let port: Int
        let log: URL

        static func filled(_ shipped: String, _ replacements: [(String, String)]) throws -> String {
            let path = LoginHost.repository.appendingPathComponent("packaging/freeradius/\(shipped)")
            var text = try String(contentsOf: path, encoding: .utf8)
            for (placeholder, value) in replacements {
                #expect(text.contains(placeholder), "\(shipped) has no `\(placeholder)` to fill in")
                text = text.replacingOccurrences(of: placeholder, with: value)
            }
            return text
        }

        /// On `port` when given (a restart), else on a free one.
        static func start(host: LoginHost, port: Int? = nil) async throws -> RADIUSServer {
            let folder = host.folder.appendingPathComponent("raddb")
            for sub in ["mods-enabled", "sites-enabled", "mods-config/files", "run", "log"] {
                try FileManager.default.createDirectory(at: folder.appendingPathComponent(sub), withIntermediateDirectories: true)
            }
            let port = port ?? unusedPort()
            func write(_ name: String, _ text: String) throws { try Data(text.utf8).write(to: folder.appendingPathComponent(name)) }
            try write(
                "radiusd.conf",
                """
                prefix = /usr
                exec_prefix = /usr
                sysconfdir = /etc
                localstatedir = /var
                sbindir = /usr/sbin
                logdir = \(folder.path)/log
                raddbdir = \(folder.path)
                radacctdir = ${logdir}/radacct
                name = freeradius
                confdir = ${raddbdir}
                modconfdir = ${confdir}/mods-config
                certdir = ${confdir}/certs
                cadir = ${confdir}/certs
                run_dir = \(folder.path)/run
                db_dir = ${raddbdir}
                libdir = /usr/lib/freeradius
                pidfile = ${run_dir}/${name}.pid
                # The phone's 50 s wait fits (the docs say so for a real server too).
                max_request_time = 60
                cleanup_delay = 5
                max_requests = 1024
                hostname_lookups = no
                log {
                \tdestination = stderr
                \tauth = yes
                }
                security {
                \tallow_core_dumps = no
                \tmax_attributes = 200
                \treject_delay = 0
                \tstatus_server = no
                }
                thread pool {
                \tstart_servers = 2
                \tmax_servers = 8
                \tmin_spare_servers = 1
                \tmax_spare_servers = 4
                \tmax_requests_per_server = 0
                }
                modules {
                \t$INCLUDE mods-enabled/
                }
                instantiate {
                }
                policy {
                }
                $INCLUDE clients.conf
                $INCLUDE sites-enabled/

                """)
            try write("clients.conf", "client localhost {\n\tipaddr = 127.0.0.1\n\tsecret = \(secret)\n}\n")
            try write("mods-enabled/files", "files {\n\tfilename = ${modconfdir}/files/authorize\n}\n")
            try write("mods-enabled/pap", "pap {\n\tnormalise = yes\n}\n")
            try write("mods-enabled/expr", "expr {\n}\n")
            // ana has a phone; bo has a password here but no Countersign account; carol is let in by
            // another Auth-Type (as an LDAP bind or pam would be), which must not skip the phone.
            try write(
                "mods-config/files/authorize",
                "ana Cleartext-Password := \"hunter2\"\nbo Cleartext-Password := \"hunter3\"\ncarol Auth-Type := Accept\n")
            try write(
                "mods-enabled/countersign",
                try filled(
                    "mods-available/countersign", [("\"http://127.0.0.1:8080\"", "\"\(host.daemon.base)\""), ("csk_FILL_IN", host.integrationKey)]))
            try write(
                "sites-enabled/countersign",
                try filled("sites-available/countersign", [("ipaddr = *", "ipaddr = 127.0.0.1"), ("port = 1812", "port = \(port)")]))
            let log = host.folder.appendingPathComponent("freeradius.log")
            let process = try await startServer("/usr/sbin/freeradius", ["-X", "-d", folder.path], log: log, ready: "Ready to process requests")
            return RADIUSServer(process: process, port: port, log: log)
        }

        var text: String { (try? String(contentsOf: log, encoding: .utf8)) ?? "" }

        func stop() { process.stop() }
    }

    /// A `radclient` Access-Request (the VPN), running while the test answers on the phone.
    struct Request {
        let process: TiedProcess
        let output: URL

        /// `retries` sendings of the same packet, `timeout` seconds apart.
        init(port: Int, user: String, password: String, retries: Int = 1, timeout: Int = 70, folder: URL) throws {
            output = folder.appendingPathComponent("radclient-\(UUID().uuidString).out")
            let input = folder.appendingPathComponent("radclient-\(UUID().uuidString).in")
            try Data("User-Name = \"\(user)\", User-Password = \"\(password)\"\n".utf8).write(to: input)
            let command =
                "exec stdbuf -oL radclient -x -r \(retries) -t \(timeout) 127.0.0.1:\(port) auth \(secret) <\(shellQuoted(input.path)) >\(shellQuoted(output.path)) 2>&1"
            process = try TiedProcess(URL(fileURLWithPath: "/bin/sh"), ["-c", command])
        }

        var text: String { (try? String(contentsOf: output, encoding: .utf8)) ?? "" }

        /// Whether radclient has sent the packet `count` times (waiting up to a minute for it).
        func sent(atLeast count: Int) async throws -> Bool {
            let clock = ContinuousClock()
            let start = clock.now
            while clock.now - start < .seconds(60) {
                if text.components(separatedBy: "Sent Access-Request").count - 1 >= count { return true }
                guard process.isRunning else { return false }
                try await Task.sleep(for: .milliseconds(100))
            }
            return false
        }

        /// "Access-Accept" or "Access-Reject", as received, or nil (no answer).
        func answer() async throws -> String? {
            #expect(try await process.exit(within: .seconds(150)), "radclient still running: \(text)")
            return text.firstMatch(of: /Received (Access-Accept|Access-Reject)/).map { String($0.1) }
        }

        static func send(port: Int, user: String = "ana", password: String, folder: URL) async throws -> String? {
            try await Request(port: port, user: user, password: password, timeout: 30, folder: folder).answer()
        }
    }

    /// The pending approvals the daemon made (its audit trail's `request_created` rows).
    static func created(_ host: LoginHost, atLeast count: Int = 0) async throws -> Int {
        try await host.audit("request_created", atLeast: count, within: count == 0 ? .zero : .seconds(30)).count
    }

    /// A daemon with ana and her phone (``LoginHost``) and FreeRADIUS in front of it, both stopped after `body`.
    static func withRADIUS(_ body: (URL, LoginHost, RADIUSServer) async throws -> Void) async throws {
        try await withTemporaryDirectory("countersign-radius") { folder in
            let host = try await LoginHost.start(folder)
            defer { host.daemon.stop() }
            let radius = try await RADIUSServer.start(host: host)
            defer { radius.stop() }
            try await body(folder, host, radius)
        }
    }

    @Test func aPushIsAcceptedWhenApprovedAndRejectedWhenDenied() async throws {
        try await Self.withRADIUS { folder, host, radius in
            let approved = try Request(port: radius.port, user: "ana", password: "hunter2", folder: folder)
            #expect(try await Self.created(host, atLeast: 1) == 1)
            _ = try await host.approve(number: nil)
            #expect(try await approved.answer() == "Access-Accept", "\(approved.text)")
            #expect(try await host.audit("completed").count == 1, "used once, by the answer")

            let denied = try Request(port: radius.port, user: "ana", password: "hunter2,push", folder: folder)
            #expect(try await Self.created(host, atLeast: 2) == 2)
            try await host.deny()
            #expect(try await denied.answer() == "Access-Reject", "\(denied.text)")
            // What the phone was shown: the VPN's words, and no number to match.
            #expect(radius.text.contains("\"action\":\"vpn-login\""))

            // The right password of someone Countersign does not know: never accepted on the password alone.
            #expect(try await Request.send(port: radius.port, user: "bo", password: "hunter3", folder: folder) == "Access-Reject")
            // A first factor checked outside Auth-Type PAP never skips Countersign: refused, nothing asked.
            #expect(try await Request.send(port: radius.port, user: "carol", password: "anything", folder: folder) == "Access-Reject")
            #expect(try await Self.created(host) == 2)
        }
    }

    @Test func aCodeInThePasswordFieldIsCheckedAfterThePassword() async throws {
        try await Self.withRADIUS { folder, host, radius in
            // A wrong password: rejected by FreeRADIUS, Countersign is never asked.
            #expect(try await Request.send(port: radius.port, password: "wrong,\(try await host.offlineCode())", folder: folder) == "Access-Reject")
            #expect(try await Self.created(host) == 0)
            // The code read off the phone as it is typed: a code lasts 30 to 60 s past its computing.
            let code = try await host.offlineCode()
            #expect(try await Request.send(port: radius.port, password: "hunter2,\(code)", folder: folder) == "Access-Accept")
            #expect(try await Request.send(port: radius.port, password: "hunter2,000000", folder: folder) == "Access-Reject")
            #expect(try await host.audit("cancelled").count == 1, "a wrong code ends its approval")
            // The code is never in the daemon's log.
            let daemonLog = try String(contentsOf: folder.appendingPathComponent("daemon.log"), encoding: .utf8)
            #expect(!daemonLog.contains(code))
        }
    }

    /// FreeRADIUS answers a retransmission of a request it is still working on by itself; the daemon sees a
    /// repeat when FreeRADIUS restarts (or another server takes the packet): its `Idempotency-Key` makes
    /// that repeat wait on the same approval.
    @Test func aRetransmittedRequestMakesOneApprovalEvenAcrossARestartOfFreeRADIUS() async throws {
        try await Self.withRADIUS { folder, host, radius in
            // The VPN sends the same packet again every 2 s (up to 80 s) while the phone has not answered.
            let request = try Request(port: radius.port, user: "ana", password: "hunter2,push", retries: 40, timeout: 2, folder: folder)
            #expect(try await Self.created(host, atLeast: 1) == 1)
            #expect(try await request.sent(atLeast: 2), "sent again: \(request.text)")
            #expect(radius.text.contains("Idempotency-Key: radius-127.0.0.1-"), "the site names the packet")

            // FreeRADIUS restarts while the phone has not answered; the next sending reaches the new one.
            radius.stop()
            let restarted = try await RADIUSServer.start(host: host, port: radius.port)
            defer { restarted.stop() }
            let asked = ContinuousClock.now
            while !restarted.text.contains("Idempotency-Key: radius-127.0.0.1-") && ContinuousClock.now - asked < .seconds(30) {
                try await Task.sleep(for: .milliseconds(100))
            }
            #expect(restarted.text.contains("Idempotency-Key: radius-127.0.0.1-"), "the restarted server asked the daemon: \(restarted.text)")
            _ = try await host.approve(number: nil)
            #expect(try await request.answer() == "Access-Accept", "\(request.text)")
            #expect(try await Self.created(host) == 1, "one approval for all sendings, across the restart")
            #expect(try await host.audit("completed").count == 1)
        }
    }

    @Test func theDaemonDownIsAReject() async throws {
        try await Self.withRADIUS { folder, host, radius throws in
            host.daemon.stop()
            // Within radclient's 30 s: connection refused is a fail, and fail is a reject.
            #expect(try await Request.send(port: radius.port, password: "hunter2", folder: folder) == "Access-Reject")
        }
    }
}

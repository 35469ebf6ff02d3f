import Foundation
import NIOHTTP1
import TestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// trust.md against the real binary: a relying service's key reaches only
/// what its holder owns.
@Suite struct TrustProcessTests {
    static let email = "ana@example.com"

    /// The attack of a relying service on a password user: enroll its own
    /// device for her, start a phone reset, approve it. Each step is refused
    /// until the operator grants the user, and even then the enrolled device
    /// cannot answer her password reset; her phone hears of the new device.
    @Test func aRelyingServicesKeyCannotTakeOverAPasswordAccount() async throws {
        try await MailDeliveryProcessTests.withFolder { folder in
            // setup: ana with her password and her phone, an integration acme, a daemon.
            let database = folder.appendingPathComponent("countersign.sqlite").path
            let added = try await DeviceSimulateTests.run(
                ["user", "add", Self.email, "--database", database, "--bcrypt-cost", "4"], input: "correct horse\n")
            #expect(added.status == 0, "\(added.output)")
            let integration = try await DaemonProcessTests.command(["integration", "add", "acme", "--database", database])
            let acmeKey = try #require(
                integration.output.split(separator: "\n").first { $0.hasPrefix("API key:") }.map {
                    $0.dropFirst("API key:".count).trimmingCharacters(in: .whitespaces)
                }, "\(integration.output)")
            let daemon = try await RunningDaemon.start(["--database", database], log: folder.appendingPathComponent("daemon.log"))
            defer { daemon.stop() }
            let base = daemon.base
            let acme = [("Authorization", "Bearer \(acmeKey)")]
            let (loggedIn, phone) = try await DaemonProcessTests.http(
                .POST, "\(base)/api/mobile/auth/login",
                json: #"{"email":"\#(Self.email)","password":"correct horse","deviceName":"Ana's phone","platform":"android"}"#)
            #expect(loggedIn == 200)
            let phoneKey = try #require(phone["apiKey"] as? String)
            let phoneID = try #require((phone["device"] as? [String: any Sendable])?["id"] as? String)

            // act & check: ana is not acme's, whether acme asks to create her or not; an unknown email answers alike.
            let (created, unavailable) = try await DaemonProcessTests.http(
                .POST, "\(base)/v1/users", json: #"{"email":"\#(Self.email)"}"#, headers: acme)
            #expect(created == 409)
            #expect(unavailable["error"] as? String == "email_unavailable")
            for email in [Self.email, "nobody@example.com"] {
                let (status, body) = try await DaemonProcessTests.http(.POST, "\(base)/v1/users/\(email)/enrollments", headers: acme)
                #expect(status == 404, "\(email)")
                #expect(body["error"] as? String == "user_not_found")
                let (listed, _) = try await DaemonProcessTests.http(.GET, "\(base)/v1/users/\(email)/devices", headers: acme)
                #expect(listed == 404)
            }

            // The operator grants her to acme: acme enrolls a device, and her phone's trail says so.
            let granted = try await DaemonProcessTests.command(["integration", "grant", "acme", Self.email, "--database", database])
            #expect(granted.status == 0, "\(granted.output)")
            #expect(try await Self.audit(database, kind: "integration_granted") { !$0.isEmpty }.first?["detail"] == "integration acme")
            let (issued, enrollment) = try await DaemonProcessTests.http(.POST, "\(base)/v1/users/\(Self.email)/enrollments", headers: acme)
            #expect(issued == 201)
            let code = try #require(enrollment["enrollmentCode"] as? String)
            let (enrolled, device) = try await DaemonProcessTests.http(
                .POST, "\(base)/api/mobile/auth/enroll", json: #"{"enrollmentCode":"\#(code)","deviceName":"Acme tablet","platform":"ios"}"#)
            #expect(enrolled == 200)
            let enrolledKey = try #require(device["apiKey"] as? String)
            // A grant lets acme enroll and list, not remove her phone.
            let (removed, _) = try await DaemonProcessTests.http(.DELETE, "\(base)/v1/users/\(Self.email)/devices/\(phoneID)", headers: acme)
            #expect(removed == 404)
            let announced = try await Self.audit(database, kind: "device_added") { !$0.isEmpty }
            #expect(announced.contains { $0["detail"]?.contains("route enroll; integration acme") == true }, "\(announced)")

            // A phone reset of ana's password: the enrolled device's answer is refused, and the request stays pending.
            let (_, initiated) = try await DaemonProcessTests.http(
                .POST, "\(base)/api/mobile/auth/reset/phone/initiate", json: #"{"email":"\#(Self.email)","newPassword":"staple orbit lantern"}"#)
            let id = try #require(initiated["requestId"] as? String)
            let number = try #require(initiated["numberCode"] as? String)
            let answer = #"{"decision":"approve","numberCode":"\#(number)"}"#
            let (refused, refusal) = try await DaemonProcessTests.http(
                .POST, "\(base)/api/mobile/approvals/\(id)/respond", json: answer, headers: [("X-API-Key", enrolledKey)])
            #expect(refused == 403)
            #expect(refusal["error"] as? String == "forbidden")
            #expect(refusal["message"] as? String == "This device cannot approve a password reset.")
            let (_, state) = try await DaemonProcessTests.http(.GET, "\(base)/api/mobile/auth/reset/phone/status/\(id)")
            #expect(state["status"] as? String == "pending")
            // Ana's own phone still can.
            let (approved, _) = try await DaemonProcessTests.http(
                .POST, "\(base)/api/mobile/approvals/\(id)/respond", json: answer, headers: [("X-API-Key", phoneKey)])
            #expect(approved == 200)

            // A code outstanding when acme is disabled dies with it, and stays dead once acme is back.
            let (_, late) = try await DaemonProcessTests.http(.POST, "\(base)/v1/users/\(Self.email)/enrollments", headers: acme)
            let lateCode = try #require(late["enrollmentCode"] as? String)
            #expect(try await DaemonProcessTests.command(["integration", "disable", "acme", "--database", database]).status == 0)
            #expect(try await DaemonProcessTests.command(["integration", "enable", "acme", "--database", database]).status == 0)
            let (voided, _) = try await DaemonProcessTests.http(
                .POST, "\(base)/api/mobile/auth/enroll", json: #"{"enrollmentCode":"\#(lateCode)","deviceName":"Late","platform":"ios"}"#)
            #expect(voided == 400)

            // Revoking the grant: ana is acme's no more.
            #expect(try await DaemonProcessTests.command(["integration", "revoke-grant", "acme", Self.email, "--database", database]).status == 0)
            let (gone, _) = try await DaemonProcessTests.http(.GET, "\(base)/v1/users/\(Self.email)/devices", headers: acme)
            #expect(gone == 404)
            #expect(try await Self.audit(database, kind: "integration_grant_revoked") { !$0.isEmpty }.first?["detail"] == "integration acme")
        }
    }

    /// trust.md: the operator decides who an integration reaches. `integration
    /// prompt-all-users` turns prompting every user with a device on and off
    /// (audited, shown by `integration list`); `user add` for an email an
    /// integration created says so and names `user passwd`, which takes the
    /// account over (audited `ownership_ended`).
    @Test func theOperatorDecidesWhomAnIntegrationReaches() async throws {
        try await MailDeliveryProcessTests.withFolder { folder in
            let (daemon, database) = try await OfflineCodeProcessTests.start(folder)
            defer { daemon.stop() }
            let base = daemon.base
            let acme = try await OfflineCodeProcessTests.acme(base, database: database)
            _ = try await OfflineCodeProcessTests.login(base)
            let sso = try await DaemonProcessTests.command(["integration", "add", "sso", "--database", database])
            let ssoKey = try #require(
                sso.output.split(separator: "\n").first { $0.hasPrefix("API key:") }.map {
                    $0.dropFirst("API key:".count).trimmingCharacters(in: .whitespaces)
                }, "\(sso.output)")
            let prompt = #"{"user":"\#(Self.email)","action":"login","title":"VPN"}"#
            let bearer = [("Authorization", "Bearer \(ssoKey)")]
            #expect(try await DaemonProcessTests.http(.POST, "\(base)/v1/approvals", json: prompt, headers: bearer).0 == 404)
            #expect(try await DaemonProcessTests.command(["integration", "prompt-all-users", "sso", "on", "--database", database]).status == 0)
            #expect(try await DaemonProcessTests.http(.POST, "\(base)/v1/approvals", json: prompt, headers: bearer).0 == 201)
            let listed = try await DaemonProcessTests.command(["integration", "list", "--database", database])
            #expect(listed.output.contains("sso  enabled  prompts all users"), "\(listed.output)")
            #expect(try await DaemonProcessTests.command(["integration", "prompt-all-users", "sso", "off", "--database", database]).status == 0)
            #expect(try await DaemonProcessTests.http(.POST, "\(base)/v1/approvals", json: prompt, headers: bearer).0 == 404)
            let switched = try await Self.audit(database, kind: "integration_prompt_all_users") { $0.count >= 2 }
            #expect(Set(switched.map { $0["detail"] ?? "" }) == ["integration sso; prompt all users off", "integration sso; prompt all users on"])

            // bo is acme's: `user add` says so and names the way to take the account over.
            let (created, _) = try await DaemonProcessTests.http(
                .POST, "\(base)/v1/users", json: #"{"email":"bo@example.com"}"#, headers: acme.headers)
            #expect(created == 201)
            let taken = try await DeviceSimulateTests.run(
                ["user", "add", "bo@example.com", "--database", database, "--bcrypt-cost", "4"], input: "a new password\n")
            #expect(taken.status != 0)
            #expect(taken.output.contains("integration acme created it"), "\(taken.output)")
            #expect(taken.output.contains("countersign user passwd bo@example.com"), "\(taken.output)")
            let passwd = try await DeviceSimulateTests.run(
                ["user", "passwd", "bo@example.com", "--database", database, "--bcrypt-cost", "4"], input: "a new password\n")
            #expect(passwd.status == 0, "\(passwd.output)")
            let ended = try await Self.audit(database, kind: "ownership_ended") { !$0.isEmpty }
            #expect(ended.first?["detail"] == "integration acme; password set by the operator (user passwd)")
            let (gone, _) = try await DaemonProcessTests.http(.GET, "\(base)/v1/users/bo@example.com/devices", headers: acme.headers)
            #expect(gone == 404)
        }
    }

    /// trust.md, "Text from outside stays data": a user agent with a quote cannot add
    /// fields to `countersign audit`'s text; one event is one line.
    @Test func aQuoteFromOutsideAddsNoFieldToTheAudit() async throws {
        try await MailDeliveryProcessTests.withFolder { folder in
            let (daemon, database) = try await OfflineCodeProcessTests.start(folder)
            defer { daemon.stop() }
            let hostile = #"Mozilla/5.0" kind=password_changed user=root"#
            let (status, _) = try await DaemonProcessTests.http(
                .POST, "\(daemon.base)/api/mobile/auth/login",
                json: #"{"email":"\#(Self.email)","password":"wrong","deviceName":"x","platform":"ios"}"#, headers: [("User-Agent", hostile)])
            #expect(status == 401)
            _ = try await Self.audit(database, kind: "login_failed") { !$0.isEmpty }
            let (listed, text) = try await DaemonProcessTests.command(["audit", "--database", database, "--kind", "login_failed"])
            #expect(listed == 0, "\(text)")
            let line = try #require(text.split(separator: "\n").first { $0.contains("login_failed") }.map(String.init), "\(text)")
            // The whole value is one quoted field, its quote escaped: what follows it is the next real field.
            let value = #"userAgent="Mozilla/5.0\" kind=password_changed user=root""#
            #expect(line.contains(value + " detail=") || line.hasSuffix(value), "\(line)")
        }
    }

    /// trust.md: what the daemon and the CLI create is owner-only whatever the
    /// umask, a database file left open to others is tightened at start, and
    /// the CLI hashes at the cost of the daemon's config file.
    @Test func filesAreOwnerOnlyAndTheCLIHashesAtTheConfiguredCost() async throws {
        try await MailDeliveryProcessTests.withFolder { folder in
            let database = folder.appendingPathComponent("countersign.sqlite").path
            let config = folder.appendingPathComponent("countersign.json")
            try Data(#"{"bcryptCost": 5}"#.utf8).write(to: config)
            // act: `user add` under a umask that would leave the file readable by all.
            let added = try await onOwnThread {
                try DeviceSimulateTests.runBlocking(
                    ["user", "add", Self.email, "--database", database, "--config", config.path], input: "correct horse\n",
                    umask: "022")
            }
            #expect(added.status == 0, "\(added.output)")
            for file in [database, database + "-wal", database + "-shm"] where FileManager.default.fileExists(atPath: file) {
                #expect(try Self.mode(file) == 0o600, "\(file)")
            }
            let prefix = try await DaemonProcessTests.command(
                [
                    "python3", "-c",
                    "import sqlite3, sys; print(sqlite3.connect(sys.argv[1]).execute('SELECT password_hash FROM users').fetchone()[0][:7])", database,
                ], program: URL(fileURLWithPath: "/usr/bin/env"))
            #expect(prefix.output.trimmingCharacters(in: .whitespacesAndNewlines) == "$2b$05$", "\(prefix.output)")

            // A database file opened up by hand is made owner-only at start, with a warning.
            #expect(chmod(database, 0o644) == 0)
            let log = folder.appendingPathComponent("daemon.log")
            let daemon = try await RunningDaemon.start(["--database", database], log: log)
            defer { daemon.stop() }
            #expect(try Self.mode(database) == 0o600)
            #expect(try String(contentsOf: log, encoding: .utf8).contains("made owner-only"))
        }
    }

    static func mode(_ path: String) throws -> Int {
        ((try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? NSNumber)?.intValue ?? -1) & 0o777
    }

    /// The audit events of `kind` as `countersign audit --json` prints them, once `ready` holds (the trail is written in batches).
    static func audit(_ database: String, kind: String, until ready: ([[String: String]]) -> Bool) async throws -> [[String: String]] {
        let clock = ContinuousClock()
        let start = clock.now
        while true {
            let (_, lines) = try await DeviceSimulateTests.run(["audit", "--database", database, "--kind", kind, "--json"], input: "")
            let events = lines.split(separator: "\n").compactMap { line in
                try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: String]
            }
            if ready(events) || clock.now - start > .seconds(60) { return events }
            try await Task.sleep(for: .milliseconds(100))
        }
    }
}

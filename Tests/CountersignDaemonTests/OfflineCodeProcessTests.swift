import Crypto
import Foundation
import NIOHTTP1
import TestSupport
import Testing

/// offline-codes.md against the real binary: the codes are computed here the
/// way an authenticator app computes them (HMAC-SHA1 with swift-crypto, from
/// the secret in the login answer; pyotp from the `otpauth://` URI).
@Suite struct OfflineCodeProcessTests {
    static let email = "ana@example.com"
    static let password = "correct horse"

    /// A signed-in phone: its API key, device id and offline secret.
    struct Phone {
        var apiKey: String
        var deviceID: String
        var secret: String
        var uri: String

        /// The code of `step` (30 s since the epoch), as an authenticator computes it.
        func code(step: Int64) throws -> String {
            try OfflineCodeProcessTests.code(secret: secret, step: step)
        }

        /// The code an authenticator shows now.
        func codeNow() throws -> String { try code(step: OfflineCodeProcessTests.stepNow()) }
    }

    static func stepNow() -> Int64 { Int64(Date().timeIntervalSince1970 / 30) }

    static func code(secret: String, step: Int64) throws -> String {
        let key = try #require(base32(secret), "secret \(secret) is not base32")
        let mac = Array(HMAC<Insecure.SHA1>.authenticationCode(for: withUnsafeBytes(of: step.bigEndian) { Data($0) }, using: SymmetricKey(data: key)))
        let offset = Int(mac[19] & 0x0F)
        let number = (UInt32(mac[offset] & 0x7F) << 24 | UInt32(mac[offset + 1]) << 16 | UInt32(mac[offset + 2]) << 8 | UInt32(mac[offset + 3]))
        return String(format: "%06u", number % 1_000_000)
    }

    /// RFC 4648 base32, as authenticator apps read secrets.
    static func base32(_ text: String) -> Data? {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567")
        var bits = 0
        var buffer = 0
        var bytes = Data()
        for character in text where character != "=" {
            guard let value = alphabet.firstIndex(of: character) else { return nil }
            buffer = (buffer << 5 | value) & 0xFFFF
            bits += 5
            if bits >= 8 {
                bytes.append(UInt8((buffer >> (bits - 8)) & 0xFF))
                bits -= 8
            }
        }
        return bytes
    }

    static func json(_ object: [String: any Sendable]) -> String {
        String(decoding: try! JSONSerialization.data(withJSONObject: object), as: UTF8.self)
    }

    /// Ana (with a password) and a daemon on a fresh database in `folder`.
    static func start(_ folder: URL, extra: [String] = []) async throws -> (daemon: RunningDaemon, database: String) {
        let database = folder.appendingPathComponent("countersign.sqlite").path
        let added = try await DeviceSimulateTests.run(
            ["user", "add", email, "--database", database, "--bcrypt-cost", "4"], input: "\(password)\n")
        #expect(added.status == 0, "\(added.output)")
        let daemon = try await RunningDaemon.start(["--database", database] + extra, log: folder.appendingPathComponent("daemon.log"))
        return (daemon, database)
    }

    /// acme, a relying service the operator granted ana to: its approvals prompt her phones,
    /// and the offline codes they show answer them (an offline code never answers a password reset).
    struct Acme {
        var base: String
        var headers: [(String, String)]

        func initiate() async throws -> (id: String, numberCode: String?) {
            let (status, body) = try await DaemonProcessTests.http(
                .POST, "\(base)/v1/approvals", json: json(["user": email, "action": "login", "title": "Sign in to Acme"]), headers: headers)
            #expect(status == 201, "\(body)")
            return (try #require(body["approvalId"] as? String), body["numberCode"] as? String)
        }

        func verify(_ id: String, _ code: String) async throws -> (Int, [String: any Sendable]) {
            try await DaemonProcessTests.http(.POST, "\(base)/v1/approvals/\(id)/verify-code", json: json(["code": code]), headers: headers)
        }

        func status(_ id: String) async throws -> [String: any Sendable] {
            try await DaemonProcessTests.http(.GET, "\(base)/v1/approvals/\(id)", headers: headers).1
        }
    }

    static func acme(_ base: String, database: String) async throws -> Acme {
        let integration = try await DaemonProcessTests.command(["integration", "add", "acme", "--database", database])
        let key = try #require(
            integration.output.split(separator: "\n").first { $0.hasPrefix("API key:") }.map {
                $0.dropFirst("API key:".count).trimmingCharacters(in: .whitespaces)
            }, "\(integration.output)")
        let granted = try await DaemonProcessTests.command(["integration", "grant", "acme", email, "--database", database])
        #expect(granted.status == 0, "\(granted.output)")
        return Acme(base: base, headers: [("Authorization", "Bearer \(key)")])
    }

    static func login(_ base: String, name: String = "Ana's phone") async throws -> (body: [String: any Sendable], phone: Phone?) {
        let (status, body) = try await DaemonProcessTests.http(
            .POST, "\(base)/api/mobile/auth/login",
            json: json(["email": email, "password": password, "deviceName": name, "platform": "android"]))
        #expect(status == 200, "\(body)")
        let offline = body["offline"] as? [String: any Sendable]
        let phone = try (offline?["secret"] as? String).map { secret in
            Phone(
                apiKey: try #require(body["apiKey"] as? String),
                deviceID: try #require((body["device"] as? [String: any Sendable])?["id"] as? String), secret: secret,
                uri: try #require(offline?["uri"] as? String))
        }
        return (body, phone)
    }

    static func initiate(_ base: String) async throws -> (id: String, numberCode: String?) {
        let (status, body) = try await DaemonProcessTests.http(
            .POST, "\(base)/api/mobile/auth/reset/phone/initiate", json: json(["email": email, "newPassword": "staple orbit lantern"]))
        #expect(status == 200, "\(body)")
        return (try #require(body["requestId"] as? String), body["numberCode"] as? String)
    }

    static func verify(_ base: String, _ id: String, _ code: String) async throws -> (Int, [String: any Sendable]) {
        try await DaemonProcessTests.http(.POST, "\(base)/api/mobile/auth/reset/phone/verify-code/\(id)", json: json(["code": code]))
    }

    static func status(_ base: String, _ id: String) async throws -> [String: any Sendable] {
        try await DaemonProcessTests.http(.GET, "\(base)/api/mobile/auth/reset/phone/status/\(id)").1
    }

    /// What pyotp (an authenticator's library) computes from the URI at `time`, or (`nil`) as it runs: after
    /// the tests' Python is ready, which on a new checkout takes longer than a code lasts.
    static func pyotp(uri: String, time: Int64? = nil) async throws -> String {
        let python = try await TestPython.path()
        let (status, output) = try await onOwnThread {
            try runToEnd(
                python,
                [
                    "-c", "import pyotp, sys, time; print(pyotp.parse_uri(sys.argv[1]).at(int(sys.argv[2]) if sys.argv[2] else int(time.time())))",
                    uri, time.map(String.init) ?? "",
                ],
                environment: ProcessInfo.processInfo.environment)
        }
        #expect(status == 0, "\(output)")
        return output.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// An app under another name: `--app-link-scheme` in enrollment links, `--otp-issuer` in the
    /// authenticator's entry (read by pyotp); a value that cannot be either stops the start.
    @Test func theAppsOwnSchemeAndIssuerNameItsLinksAndCodes() async throws {
        try await MailDeliveryProcessTests.withFolder { folder in
            let (daemon, database) = try await Self.start(folder, extra: ["--app-link-scheme", "acme-auth", "--otp-issuer", "Acme Auth"])
            defer { daemon.stop() }
            let acme = try await Self.acme(daemon.base, database: database)
            let (status, enrollment) = try await DaemonProcessTests.http(
                .POST, "\(daemon.base)/v1/users/\(Self.email)/enrollments", json: "{}", headers: acme.headers)
            #expect(status == 201, "\(enrollment)")
            #expect((enrollment["enrollmentURI"] as? String)?.hasPrefix("acme-auth://enroll?url=") == true, "\(enrollment)")
            let (_, signedIn) = try await Self.login(daemon.base)
            let phone = try #require(signedIn)
            #expect(phone.uri.hasPrefix("otpauth://totp/Acme%20Auth:ana@example.com?secret="), "\(phone.uri)")
            #expect(phone.uri.contains("&issuer=Acme%20Auth&"), "\(phone.uri)")
            let python = try await TestPython.path()
            let (parsed, output) = try await onOwnThread {
                try runToEnd(
                    python,
                    ["-c", "import pyotp, sys; t = pyotp.parse_uri(sys.argv[1]); print(t.issuer + '|' + t.name)", phone.uri],
                    environment: ProcessInfo.processInfo.environment)
            }
            #expect(parsed == 0 && output.trimmingCharacters(in: .whitespacesAndNewlines) == "Acme Auth|ana@example.com", "\(output)")
            #expect(try await Self.pyotp(uri: phone.uri, time: 1_800_000_000) == (try phone.code(step: 1_800_000_000 / 30)))
        }
        for (flag, value) in [("--app-link-scheme", "Acme Auth"), ("--app-link-scheme", "1acme"), ("--otp-issuer", "Acme:Auth")] {
            let (status, output) = try await DaemonProcessTests.command(["serve", "--database", ":memory:", flag, value])
            #expect(status != 0, "\(flag) \(value): \(output)")
            #expect(output.contains(flag), "\(output)")
        }
    }

    @Test func anApprovalIsAnsweredWithTheCodeThePhoneShowsOfflineNeverAReset() async throws {
        try await MailDeliveryProcessTests.withFolder { folder in
            let (daemon, database) = try await Self.start(folder)
            defer { daemon.stop() }
            let base = daemon.base
            let acme = try await Self.acme(base, database: database)

            // The login answer carries the secret once, and a URI an authenticator reads to the same codes.
            let (_, signedIn) = try await Self.login(base)
            let phone = try #require(signedIn, "no offline secret in the login answer")
            #expect(phone.secret.count == 32, "160 bits are 32 base32 characters")
            #expect(
                phone.uri == "otpauth://totp/Countersign:ana@example.com?secret=\(phone.secret)&issuer=Countersign&algorithm=SHA1&digits=6&period=30")
            #expect(try await Self.pyotp(uri: phone.uri, time: 1_800_000_000) == (try phone.code(step: 1_800_000_000 / 30)))

            // Input that is not a code: 400 naming the field, and the request is untouched (no wrong code counted).
            let (id, _) = try await acme.initiate()
            for bad in ["12a456", "12345", "1234567", "", String(repeating: "9", count: 10_000), "１２３４５６"] {
                let (status, body) = try await acme.verify(id, bad)
                #expect(status == 400, "\(bad.prefix(12))")
                #expect(body["error"] as? String == "invalid_request")
                #expect((body["message"] as? String)?.contains("`code`") == true, "\(body)")
            }
            let (notString, _) = try await DaemonProcessTests.http(
                .POST, "\(base)/v1/approvals/\(id)/verify-code", json: #"{"code": 123456}"#, headers: acme.headers)
            #expect(notString == 400)
            #expect(try await acme.status(id)["status"] as? String == "pending")

            // A wrong code: one message, still pending. A code two steps old: the same.
            // Each part below asks on a request of its own, made just before: a request
            // lives 60 seconds, and a busy machine may take that long over many calls.
            let (guessed, _) = try await acme.initiate()
            let wrong = try phone.codeNow() == "000000" ? "000001" : "000000"
            let (refused, refusal) = try await acme.verify(guessed, wrong)
            #expect(refused == 400)
            #expect(refusal["error"] as? String == "invalid_code")
            #expect(refusal["message"] as? String == "That code is not valid.")
            let (old, _) = try await acme.verify(guessed, try phone.code(step: Self.stepNow() - 2))
            #expect(old == 400)
            #expect(try await acme.status(guessed)["status"] as? String == "pending")

            // The code ana types into acme's page never resets her password: on the reset route it is a wrong code.
            let right = try phone.codeNow()
            let (reset, _) = try await Self.initiate(base)
            let (notForResets, resetRefusal) = try await Self.verify(base, reset, right)
            #expect(notForResets == 400)
            #expect(resetRefusal["error"] as? String == "invalid_code")
            #expect(try await Self.status(base, reset)["status"] as? String == "pending")

            // The right code approves, as the phone would have; the requester completes as usual.
            let (approving, _) = try await acme.initiate()
            let (approved, answer) = try await acme.verify(approving, right)
            #expect(approved == 200, "\(answer)")
            #expect(answer["approvalId"] as? String == approving)
            #expect(answer["status"] as? String == "approved")
            let status = try await acme.status(approving)
            #expect(status["status"] as? String == "approved")
            #expect(status["via"] as? String == "offline_code")
            let (completed, _) = try await DaemonProcessTests.http(
                .POST, "\(base)/v1/approvals/\(approving)/complete", headers: acme.headers)
            #expect(completed == 200)

            // The same code again, on a new request: used once only.
            let (next, _) = try await acme.initiate()
            let (replayed, _) = try await acme.verify(next, right)
            #expect(replayed == 400)
            #expect(try await acme.status(next)["status"] as? String == "pending")

            // The trail names the path, and the device; the answer carried no signature.
            let approvals = try await TrustProcessTests.audit(database, kind: "approved") { !$0.isEmpty }
            #expect(approvals.first?["device"] == phone.deviceID, "\(approvals)")
            #expect(approvals.first?["detail"]?.contains("offline code; the answer carries no signature") == true, "\(approvals)")

            // The secret is nowhere at rest or in the log: not in base32, not as its bytes.
            daemon.stop()
            let raw = try #require(Self.base32(phone.secret))
            for name in ["countersign.sqlite", "countersign.sqlite-wal", "daemon.log"] {
                let path = folder.appendingPathComponent(name).path
                guard let bytes = FileManager.default.contents(atPath: path) else { continue }
                #expect(bytes.range(of: Data(phone.secret.utf8)) == nil, "\(name) holds the secret in base32")
                #expect(bytes.range(of: raw) == nil, "\(name) holds the secret's bytes")
            }
        }
    }

    @Test func aKeyRefreshReplacesTheSecretAndVoidsTheOldOnesCodes() async throws {
        try await MailDeliveryProcessTests.withFolder { folder in
            let (daemon, database) = try await Self.start(folder)
            defer { daemon.stop() }
            let base = daemon.base
            let acme = try await Self.acme(base, database: database)
            let phone = try #require(try await Self.login(base).phone)
            let (refreshed, body) = try await DaemonProcessTests.http(
                .POST, "\(base)/api/mobile/auth/refresh-key", json: Self.json(["password": Self.password]),
                headers: [("X-API-Key", phone.apiKey)])
            #expect(refreshed == 200, "\(body)")
            let secret = try #require((body["offline"] as? [String: any Sendable])?["secret"] as? String)
            #expect(secret != phone.secret)

            let (id, _) = try await acme.initiate()
            let (old, _) = try await acme.verify(id, try phone.codeNow())
            #expect(old == 400)
            let (renewed, _) = try await acme.verify(id, try Self.code(secret: secret, step: Self.stepNow()))
            #expect(renewed == 200)
        }
    }

    @Test func theFifthWrongCodeDeniesAndWrongCodesPerUserAreLimited() async throws {
        try await MailDeliveryProcessTests.withFolder { folder in
            let (daemon, database) = try await Self.start(folder, extra: ["--rate-limit", "verifyCodePerUser=7/900"])
            defer { daemon.stop() }
            let base = daemon.base
            let acme = try await Self.acme(base, database: database)
            let phone = try #require(try await Self.login(base).phone)
            let right = try phone.codeNow()
            let wrong = right == "000000" ? "000001" : "000000"

            let (id, _) = try await acme.initiate()
            for attempt in 1...5 {
                let (status, body) = try await acme.verify(id, wrong)
                #expect(status == 400, "attempt \(attempt)")
                #expect(body["error"] as? String == "invalid_code")
            }
            #expect(try await acme.status(id)["status"] as? String == "denied")
            // Denied is final: the right code no longer approves.
            let (after, body) = try await acme.verify(id, right)
            #expect(after == 409, "\(body)")
            let exhausted = try await TrustProcessTests.audit(database, kind: "offline_code_exhausted") { !$0.isEmpty }
            #expect(exhausted.count == 1)

            // Seven wrong codes per (integration, user) in the window: the 8th is refused before it is checked.
            let (next, _) = try await acme.initiate()
            for _ in 1...2 {
                let (status, _) = try await acme.verify(next, wrong)
                #expect(status == 400)
            }
            let (limited, refusal) = try await acme.verify(next, wrong)
            #expect(limited == 429, "\(refusal)")
            #expect(try await acme.status(next)["status"] as? String == "pending")
        }
    }

    /// trust.md: a user's wrong codes are bounded per day across routes, kept in the
    /// database (the CLI, another process, lifts it), and the lock is told only to
    /// the relying service: on the public reset route a locked user's code is a
    /// wrong code, as an unknown email's is.
    @Test func aUsersDailyBoundLocksEveryCodeUntilTheOperatorUnlocks() async throws {
        try await MailDeliveryProcessTests.withFolder { folder in
            let (daemon, database) = try await Self.start(folder, extra: ["--rate-limit", "wrongCodesPerUserPerDay=2/86400"])
            defer { daemon.stop() }
            let base = daemon.base
            let acme = try await Self.acme(base, database: database)
            let phone = try #require(try await Self.login(base).phone)
            let wrong = try phone.codeNow() == "000000" ? "000001" : "000000"
            let (id, _) = try await acme.initiate()
            #expect(try await acme.verify(id, wrong).0 == 400)
            #expect(try await acme.verify(id, wrong).0 == 400)
            // The right code as an authenticator app computes it (pyotp, from the otpauth:// URI).
            let (locked, body) = try await acme.verify(id, try await Self.pyotp(uri: phone.uri))
            #expect(locked == 429, "\(body)")
            let lock = try await TrustProcessTests.audit(database, kind: "codes_locked") { !$0.isEmpty }
            #expect(lock.count == 1)
            // On the reset route the lock looks like any wrong code.
            let (reset, _) = try await Self.initiate(base)
            let (refused, refusal) = try await Self.verify(base, reset, "1234567890")
            #expect(refused == 400)
            #expect(refusal["error"] as? String == "invalid_code")

            let (unlocked, output) = try await DaemonProcessTests.command(["user", "unlock", Self.email, "--database", database])
            #expect(unlocked == 0, "\(output)")
            let (approved, answer) = try await acme.verify(id, try await Self.pyotp(uri: phone.uri))
            #expect(approved == 200, "\(answer)")
        }
    }

    /// An offline code typed while the phone answers: one of them wins, and
    /// the request ends as the winner said.
    @Test func anOfflineCodeAndTheDevicesAnswerRaceToOneWinner() async throws {
        try await MailDeliveryProcessTests.withFolder { folder in
            let (daemon, database) = try await Self.start(
                folder, extra: ["--rate-limit", "resetInitiatePerEmail=100/900", "--rate-limit", "resetInitiatePerIP=100/900"])
            defer { daemon.stop() }
            let base = daemon.base
            let acme = try await Self.acme(base, database: database)
            let phone = try #require(try await Self.login(base).phone)
            // Each round on a fresh step would need 30 s: other devices' codes are as good, one per round.
            var phones = [phone]
            for round in 1..<4 { phones.append(try #require(try await Self.login(base, name: "phone \(round)").phone)) }
            for round in phones.indices {
                let (id, _) = try await acme.initiate()
                let code = try phones[round].codeNow()
                async let typed = acme.verify(id, code)
                async let denied = DaemonProcessTests.http(
                    .POST, "\(base)/api/mobile/approvals/\(id)/respond", json: Self.json(["decision": "deny"]),
                    headers: [("X-API-Key", phone.apiKey)])
                let (byCode, byDevice) = try await (typed, denied)
                let final = try await acme.status(id)["status"] as? String
                #expect([byCode.0, byDevice.0].filter { $0 == 200 }.count == 1, "round \(round): \(byCode) \(byDevice)")
                #expect([byCode.0, byDevice.0].contains(409), "round \(round): the loser hears the winner's state")
                #expect(final == (byCode.0 == 200 ? "approved" : "denied"), "round \(round)")
            }
        }
    }

    @Test func bypassCodesAnswerOnceAndOnlyWhatTheyWereIssuedFor() async throws {
        try await MailDeliveryProcessTests.withFolder { folder in
            let (daemon, database) = try await Self.start(
                folder, extra: ["--rate-limit", "resetInitiatePerEmail=100/900", "--rate-limit", "resetInitiatePerIP=100/900"])
            defer { daemon.stop() }
            let base = daemon.base
            func issue(_ extra: [String] = []) async throws -> [String] {
                let (status, output) = try await DaemonProcessTests.command(
                    ["user", "bypass-codes", Self.email, "--database", database, "--count", "3"] + extra)
                #expect(status == 0, "\(output)")
                return output.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.filter {
                    $0.wholeMatch(of: /[0-9]{5}-[0-9]{5}/) != nil
                }
            }

            // Codes issued for relying services' approvals do not answer a password reset.
            let forApprovals = try await issue()
            #expect(forApprovals.count == 3)
            let (id, _) = try await Self.initiate(base)
            let (notForResets, _) = try await Self.verify(base, id, forApprovals[0])
            #expect(notForResets == 400)

            // New codes (for resets too) void the old ones; each new one works once, typed with or without its dash.
            let forResets = try await issue(["--for-password-reset"])
            #expect(Set(forResets).isDisjoint(with: forApprovals))
            let (voided, _) = try await Self.verify(base, id, forApprovals[1])
            #expect(voided == 400)
            let (used, body) = try await Self.verify(base, id, forResets[0].replacingOccurrences(of: "-", with: ""))
            #expect(used == 200, "\(body)")
            let status = try await Self.status(base, id)
            #expect(status["via"] as? String == "bypass_code")
            let (next, _) = try await Self.initiate(base)
            let (again, _) = try await Self.verify(base, next, forResets[0])
            #expect(again == 400)

            // Revoked: the unused ones stop working.
            let (revoked, output) = try await DaemonProcessTests.command(["user", "bypass-codes", Self.email, "--database", database, "--revoke"])
            #expect(revoked == 0)
            #expect(output.contains("voided 2 unused"), "\(output)")
            let (afterRevoke, _) = try await Self.verify(base, next, forResets[1])
            #expect(afterRevoke == 400)

            for kind in ["bypass_codes_issued", "bypass_code_used", "bypass_codes_revoked"] {
                let events = try await TrustProcessTests.audit(database, kind: kind) { !$0.isEmpty }
                #expect(!events.isEmpty, "\(kind)")
            }
        }
    }

    /// A relying service's user types the code of a device the service
    /// enrolled; the status says how, and which device.
    @Test func aRelyingServicesApprovalIsAnsweredByCode() async throws {
        try await MailDeliveryProcessTests.withFolder { folder in
            let (daemon, database) = try await Self.start(folder)
            defer { daemon.stop() }
            let base = daemon.base
            let integration = try await DaemonProcessTests.command(["integration", "add", "acme", "--database", database])
            let key = try #require(
                integration.output.split(separator: "\n").first { $0.hasPrefix("API key:") }.map {
                    $0.dropFirst("API key:".count).trimmingCharacters(in: .whitespaces)
                }, "\(integration.output)")
            let acme = [("Authorization", "Bearer \(key)")]
            let user = "bo@example.com"
            let (created, _) = try await DaemonProcessTests.http(.POST, "\(base)/v1/users", json: Self.json(["email": user]), headers: acme)
            #expect(created == 201)
            let (_, enrollment) = try await DaemonProcessTests.http(.POST, "\(base)/v1/users/\(user)/enrollments", headers: acme)
            let enrollmentCode = try #require(enrollment["enrollmentCode"] as? String, "\(enrollment)")
            let (enrolled, device) = try await DaemonProcessTests.http(
                .POST, "\(base)/api/mobile/auth/enroll",
                json: Self.json(["enrollmentCode": enrollmentCode, "deviceName": "Bo's phone", "platform": "ios"]))
            #expect(enrolled == 200, "\(device)")
            let offline = try #require(device["offline"] as? [String: any Sendable], "no offline secret in the enrollment answer")
            let secret = try #require(offline["secret"] as? String)
            #expect((offline["uri"] as? String)?.hasPrefix("otpauth://totp/Countersign:bo@example.com?secret=\(secret)&") == true)
            let deviceID = try #require((device["device"] as? [String: any Sendable])?["id"] as? String)

            let (made, approval) = try await DaemonProcessTests.http(
                .POST, "\(base)/v1/approvals", json: Self.json(["user": user, "action": "wire.send", "title": "Send 500 EUR?"]), headers: acme)
            #expect(made == 201, "\(approval)")
            let approvalID = try #require(approval["approvalId"] as? String)
            let (bad, badBody) = try await DaemonProcessTests.http(
                .POST, "\(base)/v1/approvals/\(approvalID)/verify-code", json: #"{"code":"abc"}"#, headers: acme)
            #expect(bad == 400)
            #expect((badBody["message"] as? String)?.contains("`code`") == true)
            let (answered, answer) = try await DaemonProcessTests.http(
                .POST, "\(base)/v1/approvals/\(approvalID)/verify-code",
                json: Self.json(["code": try Self.code(secret: secret, step: Self.stepNow())]), headers: acme)
            #expect(answered == 200, "\(answer)")
            #expect(answer["approvalId"] as? String == approvalID)
            #expect(answer["status"] as? String == "approved")
            let (_, status) = try await DaemonProcessTests.http(.GET, "\(base)/v1/approvals/\(approvalID)", headers: acme)
            #expect(status["status"] as? String == "approved")
            #expect(status["via"] as? String == "offline_code")
            #expect((status["device"] as? [String: any Sendable])?["id"] as? String == deviceID)
            #expect(status["deviceKeyBound"] as? Bool == false)

            // Another integration cannot answer acme's approval, whatever the code.
            let other = try await DaemonProcessTests.command(["integration", "add", "globex", "--database", database])
            let otherKey = try #require(
                other.output.split(separator: "\n").first { $0.hasPrefix("API key:") }.map {
                    $0.dropFirst("API key:".count).trimmingCharacters(in: .whitespaces)
                })
            let (foreign, _) = try await DaemonProcessTests.http(
                .POST, "\(base)/v1/approvals/\(approvalID)/verify-code", json: #"{"code":"123456"}"#,
                headers: [("Authorization", "Bearer \(otherKey)")])
            #expect(foreign == 404)
        }
    }

    @Test func withOfflineCodesOffNoSecretIsIssuedAndNoCodeAccepted() async throws {
        try await MailDeliveryProcessTests.withFolder { folder in
            // Ana signed in while offline codes were on; the operator then turned them off.
            let (first, database) = try await Self.start(folder)
            let phone = try #require(try await Self.login(first.base).phone)
            first.stop()
            let daemon = try await RunningDaemon.start(
                ["--database", database, "--offline-codes", "off"], log: folder.appendingPathComponent("daemon.log"))
            defer { daemon.stop() }
            let acme = try await Self.acme(daemon.base, database: database)
            let (body, none) = try await Self.login(daemon.base, name: "second phone")
            #expect(none == nil)
            #expect(body["offline"] == nil)
            let (id, _) = try await acme.initiate()
            let (refused, _) = try await acme.verify(id, try phone.codeNow())
            #expect(refused == 400)
        }
    }

    /// `countersign device simulate --offline-code` shows what an offline phone would, and that code approves.
    @Test func theSimulatedDevicesOfflineCodeApproves() async throws {
        try await MailDeliveryProcessTests.withFolder { folder in
            let (daemon, database) = try await Self.start(folder)
            defer { daemon.stop() }
            let acme = try await Self.acme(daemon.base, database: database)
            // A device of ana's first: an approval needs one to prompt.
            _ = try await Self.login(daemon.base)
            let (id, _) = try await acme.initiate()
            let (status, output) = try await DeviceSimulateTests.run(
                [
                    "device", "simulate", "--url", daemon.base, "--email", Self.email, "--offline-code", "--seconds", "1", "--key-file",
                    folder.appendingPathComponent("device.json").path,
                ], input: "\(Self.password)\n")
            #expect(status == 0, "\(output)")
            let shown = try #require(output.firstMatch(of: /offline code: ([0-9]{6})/)?.1, "\(output)")
            let (approved, body) = try await acme.verify(id, String(shown))
            #expect(approved == 200, "\(body)")
            #expect(try await acme.status(id)["via"] as? String == "offline_code")
        }
    }

    /// The demo walks through a reset answered on the phone, then one answered by an operator's bypass code.
    @Test func theDemoShowsAResetApprovedByABypassCode() async throws {
        let (status, output) = try await DaemonProcessTests.command(["demo", "--bcrypt-cost", "4"])
        #expect(status == 0, "\(output)")
        #expect(output.contains(#""status":"approved","via":"push""#), "\(output)")
        #expect(output.contains(#""status":"approved","via":"bypass_code""#), "\(output)")
        #expect(output.hasSuffix("Run `countersign serve` for a real daemon.\n"))
        #expect(output.firstMatch(of: /[A-Z2-7]{32}/) == nil, "the demo prints no offline secret")
        #expect(!output.contains("otpauth://totp/Countersign:"))
    }
}

extension OfflineCodeProcessTests {
    /// `demo --email` prints the mail with a link to the port its own daemon listens on.
    @Test func theEmailDemosLinkNamesItsDaemonsPort() async throws {
        let (status, output) = try await DaemonProcessTests.command(["demo", "--email", "--bcrypt-cost", "4"])
        #expect(status == 0, "\(output)")
        let listening = try #require(output.firstMatch(of: /listens on http:\/\/127\.0\.0\.1:([0-9]+)/)).output.1
        let linked = try #require(output.firstMatch(of: /http:\/\/127\.0\.0\.1:([0-9]+)\/reset-password\?token=/)).output.1
        #expect(linked == listening)
    }
}

import CountersignDevice
import Crypto
import Foundation
import NIOHTTP1
import TestSupport
import Testing

/// The `CountersignDevice` library against the real daemon, as an app would use it.
@Suite struct DeviceLibraryTests {
    static let email = OfflineCodeProcessTests.email

    @Test func aDeviceSignsInAnswersSignedAndKeepsItsIdentity() async throws {
        try await MailDeliveryProcessTests.withFolder { folder in
            let (daemon, database) = try await OfflineCodeProcessTests.start(folder, extra: ["--rate-limit", "resetInitiatePerEmail=100/900"])
            defer { daemon.stop() }
            let keyFile = folder.appendingPathComponent("phone.json").path
            let phone = CountersignDevice(baseURL: daemon.base + "/", store: FileKeyStore(path: keyFile))
            #expect(try await phone.credentials() == nil)
            await #expect(throws: DeviceError.notSignedIn) { try await phone.pending() }
            await #expect(throws: DeviceError.refused(status: 401, error: "invalid_credentials", message: "Incorrect email or password.")) {
                try await phone.signIn(email: Self.email, password: "wrong", name: "Ana's phone", platform: "ios")
            }
            let credentials = try await phone.signIn(
                email: Self.email, password: OfflineCodeProcessTests.password, name: "Ana's phone", platform: "ios")
            #expect(credentials.keyBound)
            #expect(credentials.email == Self.email)
            #expect(credentials.offlineSecret != nil)
            #expect(try TrustProcessTests.mode(keyFile) == 0o600)

            // A request waits; the phone sees it and approves with the number the requester was shown.
            let (first, number) = try await OfflineCodeProcessTests.initiate(daemon.base)
            let pending = try await phone.waitForPending(timeout: .seconds(30))
            #expect(pending.map(\.requestId) == [first])
            #expect(pending.first?.numberMatching == true)
            #expect(pending.first?.action == "password_reset")
            #expect(try await phone.answer(first, .approve, numberCode: number) == "approved")
            #expect(try await OfflineCodeProcessTests.status(daemon.base, first)["via"] as? String == "push")

            // Another instance on the same key file is the same device: no second sign-in.
            let again = CountersignDevice(baseURL: daemon.base, store: FileKeyStore(path: keyFile))
            #expect(try await again.credentials() == credentials)
            let (second, _) = try await OfflineCodeProcessTests.initiate(daemon.base)
            // A wrong number denies, with the daemon's error code.
            await #expect(
                throws: DeviceError.refused(status: 422, error: "number_mismatch", message: "The number did not match, so the request was denied.")
            ) {
                try await again.answer(second, .approve, numberCode: "00")
            }
            #expect(try await OfflineCodeProcessTests.status(daemon.base, second)["status"] as? String == "denied")

            // The offline code it shows approves where a relying service's requester waits (never a password reset).
            let acme = try await OfflineCodeProcessTests.acme(daemon.base, database: database)
            let (third, _) = try await acme.initiate()
            let code = try #require(try await again.offlineCode())
            let (verified, _) = try await acme.verify(third, code)
            #expect(verified == 200)

            // A fraud report is signed with its denial, and silences the user's prompts.
            let (fourth, _) = try await OfflineCodeProcessTests.initiate(daemon.base)
            #expect(try await again.answer(fourth, .deny, reportFraud: true) == "denied")
            let frauds = try await TrustProcessTests.audit(
                folder.appendingPathComponent("countersign.sqlite").path, kind: "fraud_reported"
            ) { !$0.isEmpty }
            #expect(frauds.count == 1)

            // One request read alone carries its state.
            #expect(try await again.approval(fourth).status == "denied")
            // A push token, then a new key for the password: the old key stops, the new offline secret is kept.
            try await again.updatePushToken("fcm-token-of-anas-phone")
            let refreshed = try await again.refreshKey(password: OfflineCodeProcessTests.password)
            #expect(refreshed.apiKey != credentials.apiKey && refreshed.offlineSecret != credentials.offlineSecret)
            let (stale, _) = try await DaemonProcessTests.http(
                .GET, "\(daemon.base)/api/mobile/approvals/pending", headers: [("X-API-Key", credentials.apiKey)])
            #expect(stale == 401)
            #expect(try await again.pending().isEmpty)

            // Signed out: the daemon forgets the device, the store its credentials (the key stays).
            try await again.signOut()
            #expect(try await again.credentials() == nil)
            let (refused, _) = try await DaemonProcessTests.http(
                .GET, "\(daemon.base)/api/mobile/approvals/pending", headers: [("X-API-Key", refreshed.apiKey)])
            #expect(refused == 401)
            // Credentials for another daemon are not this one's.
            let elsewhere = CountersignDevice(baseURL: "http://127.0.0.1:1", store: FileKeyStore(path: keyFile))
            #expect(try await elsewhere.credentials() == nil)
        }
    }

    /// An integration's user enrolls with the one-time code: no password.
    @Test func aDeviceEnrollsWithAnIntegrationsCode() async throws {
        try await MailDeliveryProcessTests.withFolder { folder in
            let (daemon, database) = try await OfflineCodeProcessTests.start(folder)
            defer { daemon.stop() }
            let integration = try await DaemonProcessTests.command(["integration", "add", "acme", "--database", database])
            let key = try #require(integration.output.firstMatch(of: /API key:\s+(\S+)/)?.1)
            let acme = [("Authorization", "Bearer \(key)")]
            _ = try await DaemonProcessTests.http(.POST, "\(daemon.base)/v1/users", json: #"{"email":"bo@example.com"}"#, headers: acme)
            let (_, enrollment) = try await DaemonProcessTests.http(.POST, "\(daemon.base)/v1/users/bo@example.com/enrollments", headers: acme)
            let code = try #require(enrollment["enrollmentCode"] as? String)

            let phone = CountersignDevice(baseURL: daemon.base, store: MemoryKeyStore())
            await #expect(throws: DeviceError.self) { try await phone.enroll(code: "WRONGCODE123", name: "Bo's phone", platform: "android") }
            let credentials = try await phone.enroll(code: code, name: "Bo's phone", platform: "android")
            #expect(credentials.email == "bo@example.com" && credentials.keyBound)

            let (_, created) = try await DaemonProcessTests.http(
                .POST, "\(daemon.base)/v1/approvals", json: #"{"user":"bo@example.com","action":"login","title":"Sign in to Acme?"}"#,
                headers: acme)
            let id = try #require(created["approvalId"] as? String)
            let waiting = try #require(try await phone.pending().first)
            #expect(waiting.title == "Sign in to Acme?")
            #expect(waiting.integration?.name == "acme")
            #expect(try await phone.answer(id, .approve, numberCode: created["numberCode"] as? String) == "approved")
        }
    }

    /// A key file that cannot be read, or holds something else, is an error: never replaced by a new device.
    @Test func aKeyFileThatCannotBeReadIsNeverReplaced() async throws {
        try await MailDeliveryProcessTests.withFolder { folder in
            let corrupt = folder.appendingPathComponent("corrupt.json").path
            try Data("not json".utf8).write(to: URL(fileURLWithPath: corrupt))
            await #expect(throws: DeviceError.self) { try await FileKeyStore(path: corrupt).signer() }
            #expect(FileManager.default.contents(atPath: corrupt) == Data("not json".utf8))
            let directory = folder.appendingPathComponent("a-directory").path
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false)
            await #expect(throws: DeviceError.self) { try await FileKeyStore(path: directory).signer() }
            // A new path gets a key, the same on every later read and from another store.
            let fresh = folder.appendingPathComponent("fresh.json").path
            let key = try await FileKeyStore(path: fresh).signer().publicKey().rawRepresentation
            #expect(try await FileKeyStore(path: fresh).signer().publicKey().rawRepresentation == key)
            #expect(try TrustProcessTests.mode(fresh) == 0o600)
        }
    }

    /// `device simulate` asked to be another account on a key file that holds a device says so (exit 1) and leaves it as it was.
    @Test func theSimulatorRefusesToTurnItsKeyFileIntoAnotherDevice() async throws {
        try await MailDeliveryProcessTests.withFolder { folder in
            let (daemon, database) = try await OfflineCodeProcessTests.start(folder)
            defer { daemon.stop() }
            let keyFile = folder.appendingPathComponent("phone.json").path
            let first = try await DeviceSimulateTests.run(
                ["device", "simulate", "--url", daemon.base, "--email", Self.email, "--key-file", keyFile, "--seconds", "1"],
                input: "\(OfflineCodeProcessTests.password)\n")
            #expect(first.status == 0, "\(first.output)")
            let before = FileManager.default.contents(atPath: keyFile)
            let other = try await DeviceSimulateTests.run(
                ["device", "simulate", "--url", daemon.base, "--email", "bo@example.com", "--key-file", keyFile, "--seconds", "1"],
                input: "whatever\n")
            #expect(other.status == 1, "\(other.output)")
            #expect(other.output.contains("already holds device"), "\(other.output)")
            #expect(!other.output.contains("USAGE"), "a failure of the run, not of its usage")
            #expect(FileManager.default.contents(atPath: keyFile) == before)
            let devices = try await DaemonProcessTests.command(["device", "list", Self.email, "--database", database])
            #expect(devices.output.components(separatedBy: "countersign device simulate").count == 2, "one device: \(devices.output)")
        }
    }

    @Test func pushNoticesAreRead() throws {
        #expect(
            DeviceNotice(pushData: ["type": "approval_request", "requestId": "r", "action": "login", "expiresAt": "t", "title": "Sign in?"])
                == .approvalRequest(PromptNotice(requestID: "r", action: "login", expiresAt: "t", title: "Sign in?")))
        // An APNs notification's userInfo gives the same notice as the FCM data of the same push, its words and context too.
        let data = [
            "type": "approval_request", "requestId": "r", "action": "payment", "expiresAt": "t", "title": "Pay 5 EUR?", "body": "From Acme",
            "integration": "Acme", "context": #"{"ip":"203.0.113.7"}"#,
        ]
        let userInfo: [AnyHashable: Any] = data.reduce(into: ["aps": ["alert": ["title": "Pay 5 EUR?"]] as [String: Any]]) { $0[$1.key] = $1.value }
        #expect(DeviceNotice(userInfo: userInfo) == DeviceNotice(pushData: data))
        // A readable password-reset prompt over APNs: its words are in the alert only.
        let reset: [AnyHashable: Any] = [
            "aps": ["alert": ["title": "Approve password reset?", "body": "A password reset was requested from 203.0.113.7."]],
            "type": "approval_request", "requestId": "r2", "action": "password_reset", "expiresAt": "t",
        ]
        #expect(
            DeviceNotice(userInfo: reset)
                == .approvalRequest(
                    PromptNotice(
                        requestID: "r2", action: "password_reset", expiresAt: "t", title: "Approve password reset?",
                        body: "A password reset was requested from 203.0.113.7.")))
        #expect(
            DeviceNotice(userInfo: userInfo)
                == .approvalRequest(
                    PromptNotice(
                        requestID: "r", action: "payment", expiresAt: "t", title: "Pay 5 EUR?", body: "From Acme", integration: "Acme",
                        context: ["ip": "203.0.113.7"])))
        #expect(
            DeviceNotice(pushData: ["type": "approval_resolved", "requestId": "r", "status": "approved"])
                == .approvalResolved(requestID: "r", status: "approved"))
        #expect(
            DeviceNotice(pushData: ["type": "device_added", "deviceName": "Tablet", "platform": "android", "at": "t"])
                == .deviceAdded(name: "Tablet", platform: "android", at: "t"))
        #expect(DeviceNotice(pushData: ["type": "approval_resolved"]) == nil)
        #expect(DeviceNotice(pushData: ["type": "something else"]) == nil)
        // A Web Push payload, as a UnifiedPush distributor hands it over decrypted, gives the same notice as FCM's data.
        let payload = try JSONSerialization.data(withJSONObject: data)
        #expect(DeviceNotice(webPushPayload: payload) == DeviceNotice(pushData: data))
        #expect(DeviceNotice(webPushPayload: Data("not json".utf8)) == nil)
        // A push without user data (`--sealed-push required`, a device without a sealing key): the app reads the request.
        #expect(DeviceNotice(pushData: ["type": "approval_request", "requestId": "r"]) == .approvalWaiting(requestID: "r"))
        #expect(DeviceNotice(pushData: ["type": "approval_resolved", "requestId": "r"]) == .approvalResolved(requestID: "r", status: nil))
        #expect(DeviceNotice(pushData: ["type": "device_added"]) == .deviceAdded(name: nil, platform: nil, at: nil))
        // A readable prompt missing a part is no notice (not taken for a bare one).
        #expect(DeviceNotice(pushData: ["type": "approval_request", "requestId": "r", "action": "login"]) == nil)
    }
}

extension DeviceLibraryTests {
    /// push-providers.md with the device library and the real binary: a device
    /// subscribed through UnifiedPush gets its prompt as Web Push, reads the
    /// notice from the decrypted payload, and moves to another provider.
    @Test func aDeviceSubscribedThroughWebPushGetsItsPromptsThere() async throws {
        try await MailDeliveryProcessTests.withFolder { folder in
            let server = try await PushTestServer(.webPush, folder: folder)
            defer { server.stop() }
            let (daemon, _) = try await OfflineCodeProcessTests.start(
                folder, extra: ["--vapid-subject", "mailto:ops@example.com", "--push-allow-private-endpoints"])
            defer { daemon.stop() }
            let phone = CountersignDevice(baseURL: daemon.base, store: MemoryKeyStore())
            let endpoint = "\(server.base)/push/library-phone"
            try await phone.signIn(
                email: Self.email, password: OfflineCodeProcessTests.password, name: "Ana's Fairphone", platform: "android",
                push: .webPush(endpoint: endpoint, p256dh: try #require(server.p256dh), auth: try #require(server.auth)))
            let offer = try await phone.pushOffer()
            #expect(offer.providers == ["webpush"])
            // The key was made on first start, beside the database.
            #expect(FileManager.default.fileExists(atPath: folder.appendingPathComponent("countersign.vapid.pem").path))

            let (id, _) = try await OfflineCodeProcessTests.initiate(daemon.base)
            let received = try await server.wait { $0.contains { $0.payload?["requestId"] == id } }
            let prompt = try #require(received.first { $0.payload?["requestId"] == id })
            #expect(prompt.vapid?.valid == true && prompt.vapid?.k == offer.vapidPublicKey)
            let notice = DeviceNotice(pushData: try #require(prompt.payload))
            #expect(
                notice
                    == .approvalRequest(
                        PromptNotice(
                            requestID: id, action: "password_reset", expiresAt: prompt.payload?["expiresAt"] ?? "", title: "Approve password reset?",
                            body: prompt.payload?["body"])))

            // Moving to APNs: the daemon keeps the new address (APNs is not configured here: nothing is sent),
            // and the operator's device list shows its provider and last characters only.
            let apnsToken = String(repeating: "0f", count: 31) + "c0ffee"
            try await phone.updatePush(.apns(token: apnsToken, topic: "com.example.app", sandbox: true))
            let database = folder.appendingPathComponent("countersign.sqlite").path
            let listed = try await DeviceSimulateTests.run(["device", "list", Self.email, "--database", database], input: "")
            #expect(listed.output.contains("push apns …c0ffee"), "\(listed.output)")
            #expect(!listed.output.contains(apnsToken))
            try await phone.updatePush(nil)
            #expect(
                try await DeviceSimulateTests.run(["device", "list", Self.email, "--database", database], input: "").output.contains("pull only"))
            // A bad subscription is refused with the field named.
            await #expect(
                throws: DeviceError.refused(status: 400, error: "invalid_request", message: "The field `auth` must be 16 bytes, base64url.")
            ) {
                try await phone.updatePush(.webPush(endpoint: endpoint, p256dh: try #require(server.p256dh), auth: "c2hvcnQ"))
            }
        }
    }
}

extension DeviceLibraryTests {
    /// A signing key the library never holds, as a Secure Enclave keeps one: it lives in this
    /// actor, and only its public key and signatures come out. Counts what it signed.
    actor EnclaveSigner: DeviceSigner {
        private let key = P256.Signing.PrivateKey()
        private(set) var signed = 0

        func publicKey() async throws -> P256.Signing.PublicKey { key.publicKey }

        func signature(for message: Data) async throws -> P256.Signing.ECDSASignature {
            signed += 1
            return try key.signature(for: message)
        }
    }

    /// A key store whose signer the app changes once the daemon took the new key.
    actor AppKeyStore: DeviceKeyStore {
        private(set) var current: any DeviceSigner
        private let sealing = P256.KeyAgreement.PrivateKey()
        private var kept: DeviceCredentials?

        init(_ signer: any DeviceSigner) { current = signer }
        func use(_ signer: any DeviceSigner) { current = signer }
        func signer() async throws -> any DeviceSigner { current }
        func sealingKey() async throws -> P256.KeyAgreement.PrivateKey { sealing }
        func credentials() async throws -> DeviceCredentials? { kept }
        func save(_ credentials: DeviceCredentials?) async throws { kept = credentials }
    }

    /// What went out through the transport seam, by path.
    actor Sent {
        private var bodies: [(url: String, body: Data)] = []
        func add(_ url: String, _ body: Data?) {
            if let body { bodies.append((url, body)) }
        }
        /// The members of the last body sent to a URL ending in `suffix` whose values are strings.
        func last(_ suffix: String) -> [String: String]? {
            bodies.last { $0.url.hasSuffix(suffix) }
                .flatMap { (try? JSONSerialization.jsonObject(with: $0.body)) as? [String: Any] }?.compactMapValues { $0 as? String }
        }
    }

    /// device-keys.md through the library with a `DeviceSigner` whose key it never holds, against the real
    /// binary: the signer's signatures approve (PyJWT verifies one with the public key alone), the key is
    /// replaced with proofs from both signers, and an answer signed by the old key is refused.
    @Test func aSignerWhoseKeyTheLibraryNeverHoldsApprovesAndReplacesItsKey() async throws {
        try await MailDeliveryProcessTests.withFolder { folder in
            let (daemon, _) = try await OfflineCodeProcessTests.start(folder, extra: ["--rate-limit", "resetInitiatePerEmail=100/900"])
            defer { daemon.stop() }
            let enclave = EnclaveSigner()
            let store = AppKeyStore(enclave)
            let sent = Sent()
            let urlSession = CountersignDevice.urlSession()
            let phone = CountersignDevice(baseURL: daemon.base, store: store) { method, url, body, apiKey in
                await sent.add(url, body)
                return try await urlSession(method, url, body, apiKey)
            }
            let credentials = try await phone.signIn(
                email: Self.email, password: OfflineCodeProcessTests.password, name: "Ana's phone", platform: "ios")
            #expect(credentials.keyBound)

            let (first, number) = try await OfflineCodeProcessTests.initiate(daemon.base)
            #expect(try await phone.answer(first, .approve, numberCode: number) == "approved")
            #expect(await enclave.signed == 1)
            let signature = try #require(await sent.last("/\(first)/respond")?["signature"])
            let point = try await enclave.publicKey().x963Representation
            let verified = try await Self.pyJWT(signature, point: point)
            #expect(verified["typ"] as? String == "countersign-answer+jwt")
            #expect(verified["requestId"] as? String == first && verified["decision"] as? String == "approve")
            #expect(verified["deviceId"] as? String == credentials.deviceID && verified["numberCode"] as? String == number)

            // A new key: it proves itself, and the current one agrees.
            let next = EnclaveSigner()
            try await phone.replaceKey(with: next)
            #expect(await enclave.signed == 2)
            #expect(await next.signed == 1)
            let replaced = try #require(await sent.last("/device/public-key"))
            #expect(replaced["previousProof"] != nil && replaced["proof"] != nil)

            // The old key's answer is refused and changes nothing; the new key's approves.
            let (second, secondNumber) = try await OfflineCodeProcessTests.initiate(daemon.base)
            do {
                try await phone.answer(second, .approve, numberCode: secondNumber)
                Issue.record("an answer signed by the replaced key was taken")
            } catch DeviceError.refused(let status, let error, _) {
                #expect(status == 401 && error == "invalid_signature")
            }
            #expect(try await OfflineCodeProcessTests.status(daemon.base, second)["status"] as? String == "pending")
            await store.use(next)
            #expect(try await phone.answer(second, .approve, numberCode: secondNumber) == "approved")
            #expect(await next.signed == 2)
        }
    }

    /// PyJWT (on cryptography) verifying `jws` with the P-256 key whose uncompressed point is `point`:
    /// its header's `typ` and its claims.
    static func pyJWT(_ jws: String, point: Data) async throws -> [String: Any] {
        let script = """
            import json, sys, jwt
            from cryptography.hazmat.primitives.asymmetric import ec
            key = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), bytes.fromhex(sys.argv[1]))
            claims = jwt.decode(sys.argv[2], key, algorithms=["ES256"])
            print(json.dumps(dict(claims, typ=jwt.get_unverified_header(sys.argv[2])["typ"])))
            """
        let hex = point.map { String(format: "%02x", $0) }.joined()
        let python = try await TestPython.path()
        let (status, output) = try await onOwnThread {
            try runToEnd(python, ["-c", script, hex, jws], environment: ProcessInfo.processInfo.environment)
        }
        #expect(status == 0, "\(output)")
        return try #require(try JSONSerialization.jsonObject(with: Data(output.utf8)) as? [String: Any])
    }
}

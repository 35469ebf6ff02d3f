import CountersignDevice
import Foundation
import NIOHTTP1
import Testing

/// The `CountersignDevice` library against the real daemon, as an app would use it.
@Suite struct DeviceLibraryTests {
    static let email = OfflineCodeProcessTests.email

    @Test func aDeviceSignsInAnswersSignedAndKeepsItsIdentity() async throws {
        try await MailDeliveryProcessTests.withFolder { folder in
            let (daemon, _) = try await OfflineCodeProcessTests.start(folder, extra: ["--rate-limit", "resetInitiatePerEmail=100/900"])
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

            // The offline code it shows approves where the requester waits.
            let (third, _) = try await OfflineCodeProcessTests.initiate(daemon.base)
            let code = try #require(try await again.offlineCode())
            let (verified, _) = try await OfflineCodeProcessTests.verify(daemon.base, third, code)
            #expect(verified == 200)

            // A fraud report is signed with its denial, and silences the user's prompts.
            let (fourth, _) = try await OfflineCodeProcessTests.initiate(daemon.base)
            #expect(try await again.answer(fourth, .deny, reportFraud: true) == "denied")
            let frauds = try await TrustProcessTests.audit(
                folder.appendingPathComponent("countersign.sqlite").path, kind: "fraud_reported"
            ) { !$0.isEmpty }
            #expect(frauds.count == 1)

            // Signed out: the daemon forgets the device, the store its credentials (the key stays).
            try await again.signOut()
            #expect(try await again.credentials() == nil)
            let (refused, _) = try await DaemonProcessTests.http(
                .GET, "\(daemon.base)/api/mobile/approvals/pending", headers: [("X-API-Key", credentials.apiKey)])
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

    @Test func pushNoticesAreRead() {
        #expect(
            DeviceNotice(pushData: ["type": "approval_request", "requestId": "r", "action": "login", "expiresAt": "t", "title": "Sign in?"])
                == .approvalRequest(requestID: "r", action: "login", expiresAt: "t", title: "Sign in?"))
        #expect(
            DeviceNotice(pushData: ["type": "approval_resolved", "requestId": "r", "status": "approved"])
                == .approvalResolved(requestID: "r", status: "approved"))
        #expect(
            DeviceNotice(pushData: ["type": "device_added", "deviceName": "Tablet", "platform": "android", "at": "t"])
                == .deviceAdded(name: "Tablet", platform: "android", at: "t"))
        #expect(DeviceNotice(pushData: ["type": "approval_resolved"]) == nil)
        #expect(DeviceNotice(pushData: ["type": "something else"]) == nil)
    }
}

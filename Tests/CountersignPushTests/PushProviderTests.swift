import AsyncHTTPClient
import CountersignCore
import CountersignOutbound
import Crypto
import Foundation
import JWTKit
import Logging
import Synchronization
import TestSupport
import Testing

@testable import CountersignPush

/// push-providers.md: the APNs and Web Push forms of a message, their
/// answers sorted as the contract says, RFC 8291 encryption and the
/// provider tokens (APNs) and VAPID headers (Web Push).
@Suite struct PushProviderTests {
    /// trust.md: every file the daemon creates is its owner's alone. The VAPID key made on
    /// first start is 0600 (here under the process's umask, 022 unless set tighter), and read back as made.
    @Test func theVAPIDKeyIsCreatedForItsOwnerOnly() async throws {
        try await withTemporaryFolder { folder in
            let path = folder.url.appendingPathComponent("vapid.pem").path
            let made = try VAPIDKeyFile.load(path: path, create: true, logger: Logger(label: "test"))
            let mode = try #require(try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int)
            #expect(mode == 0o600, "mode \(String(mode, radix: 8))")
            let again = try VAPIDKeyFile.load(path: path, create: true, logger: Logger(label: "test"))
            #expect(again.publicKey.rawRepresentation == made.publicKey.rawRepresentation)
        }
    }

    static let now = Date(timeIntervalSince1970: 1_800_000_000)
    static let requestID = "AbCdEfGhIjKlMnOpQrStUv"

    static func prompt(expiresIn: TimeInterval = 60) -> PushJob {
        .prompt(
            requestID: requestID, userID: "u1", action: .passwordReset, expiresAt: now.addingTimeInterval(expiresIn),
            requester: RequesterInfo(ip: "203.0.113.7", userAgent: "PhotoSync/2.3"))
    }

    static func decode(_ data: Data) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
    }

    // MARK: RFC 8291

    /// RFC 8291 Appendix A: the same keys and salt give the RFC's bytes.
    @Test func theRFC8291ExampleEncryptsToTheRFCsBytes() throws {
        let senderKey = try P256.KeyAgreement.PrivateKey(
            rawRepresentation: try #require(DeviceKey.decode("yfWPiYE-n46HLnH0KqZOF1fJJU3MYrct3AELtAQ-oRw")))
        let salt: Data = try #require(DeviceKey.decode("DGv6ra1nlYgDCS1FRnbzlw"))
        let body = try WebPushEncryption.encrypt(
            Data("When I grow up, I want to be a watermelon".utf8),
            p256dh: try #require(DeviceKey.decode("BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4")),
            auth: try #require(DeviceKey.decode("BTBZMqHH6r4Tts7J_aSIgg")), senderKey: senderKey,
            salt: salt)
        #expect(
            SecureToken.base64URL(body)
                == "DGv6ra1nlYgDCS1FRnbzlwAAEABBBP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A_yl95bQpu6cVPTpK4Mqgkf1CXztLVBSt2Ks3oZwbuwXPXLWyouBWLVWGNWQexSgSxsj_Qulcy4a-fN"
        )
    }

    @Test func eachMessageHasItsOwnKeyAndSaltAndTooLargeIsRefused() throws {
        let receiver = P256.KeyAgreement.PrivateKey()
        let auth = Data(repeating: 7, count: 16)
        let one = try WebPushEncryption.encrypt(Data("x".utf8), p256dh: receiver.publicKey.x963Representation, auth: auth)
        let two = try WebPushEncryption.encrypt(Data("x".utf8), p256dh: receiver.publicKey.x963Representation, auth: auth)
        #expect(one.prefix(16) != two.prefix(16))
        #expect(one.count == 16 + 4 + 1 + 65 + 1 + 1 + 16)
        #expect(throws: WebPushEncryption.Failure.self) {
            try WebPushEncryption.encrypt(Data(count: 4000), p256dh: receiver.publicKey.x963Representation, auth: auth)
        }
        #expect(throws: WebPushEncryption.Failure.self) {
            try WebPushEncryption.encrypt(Data("x".utf8), p256dh: Data(count: 65), auth: auth)
        }
    }

    // MARK: Messages

    @Test func anAPNsPromptCarriesTheFCMApsAndDataAndTheContractsHeaders() throws {
        let message = try #require(try ProviderMessages.apns(for: Self.prompt(), topic: "com.example.app", now: Self.now))
        let headers = Dictionary(uniqueKeysWithValues: message.headers.map { ($0.name, $0.value) })
        #expect(headers["apns-topic"] == "com.example.app")
        #expect(headers["apns-push-type"] == "alert")
        #expect(headers["apns-priority"] == "10")
        #expect(headers["apns-expiration"] == String(Int(Self.now.timeIntervalSince1970) + 60))
        #expect(headers["apns-collapse-id"] == "approval-" + Self.requestID.prefix(40))
        let body = try Self.decode(message.body)
        let aps = try #require(body["aps"] as? [String: Any])
        let alert = try #require(aps["alert"] as? [String: String])
        #expect(alert["title"] == "Approve password reset?")
        #expect(alert["body"]?.contains("203.0.113.7") == true)
        #expect(aps["category"] as? String == "APPROVAL_REQUEST")
        #expect(aps["mutable-content"] as? Int == 1)
        #expect(aps["interruption-level"] as? String == "time-sensitive")
        #expect(body["type"] as? String == "approval_request")
        #expect(body["requestId"] as? String == Self.requestID)
        #expect(body["action"] as? String == "password_reset")
        #expect(try ProviderMessages.apns(for: Self.prompt(expiresIn: 0.5), topic: "t", now: Self.now) == nil)
    }

    @Test func anAPNsNoticeIsABackgroundPushWithoutAlert() throws {
        let job = PushJob.resolved(requestID: Self.requestID, userID: "u1", status: .approved)
        let message = try #require(try ProviderMessages.apns(for: job, topic: "com.example.app", now: Self.now))
        let headers = Dictionary(uniqueKeysWithValues: message.headers.map { ($0.name, $0.value) })
        #expect(headers["apns-push-type"] == "background")
        #expect(headers["apns-priority"] == "5")
        #expect(headers["apns-collapse-id"] == nil)
        let body = try Self.decode(message.body)
        let aps = try #require(body["aps"] as? [String: Any])
        #expect(aps["content-available"] as? Int == 1)
        #expect(aps["alert"] == nil)
        #expect(body["status"] as? String == "approved")
    }

    @Test func aWebPushPromptHoldsTheDataKeysTitleAndBodyAndNoSecret() throws {
        let message = try #require(ProviderMessages.webPush(for: Self.prompt(), now: Self.now))
        #expect(message.ttl == 60)
        #expect(message.urgency == "high")
        #expect(message.topic == ApprovalRequest.logReference(of: Self.requestID))
        let payload = try Self.decode(message.payload)
        #expect(Set(payload.keys) == ["type", "requestId", "action", "expiresAt", "title", "body"])
        #expect(payload["title"] as? String == "Approve password reset?")
        let notice = try #require(
            ProviderMessages.webPush(
                for: .deviceAdded(userID: "u1", deviceID: "d2", deviceName: "Tablet", platform: "android", at: Self.now), now: Self.now))
        #expect(notice.urgency == "normal")
        #expect(notice.topic == nil)
        #expect(notice.ttl == 300)
        #expect(try Self.decode(notice.payload)["type"] as? String == "device_added")
    }

    /// The APNs body and the Web Push payload of a readable integration prompt carry the FCM
    /// message's data keys exactly (with its context), the words as written (a `/` is not escaped,
    /// a line break and a quote are), and nothing else but `aps` (APNs) or the title and body (Web Push).
    @Test func apnsAndWebPushBodiesCarryTheFCMDataExactly() throws {
        let job = PushJob.prompt(
            requestID: Self.requestID, userID: "u1", action: ApprovalAction(rawValue: "payment")!, expiresAt: Self.now.addingTimeInterval(60),
            requester: RequesterInfo(ip: "203.0.113.7", userAgent: "PhotoSync/2.3"),
            prompt: ApprovalPrompt(
                integrationID: "i1", integrationName: "Acme / Payroll", userEmail: "ana@example.com", title: "Pay 5,000 EUR to \"Bob\"",
                body: "From https://pay.example/req\nline two \u{1F510}", context: ["url": "https://pay.example/a/b", "note": "tab\there"]))
        let fcm = try #require(FCMMessageBuilder.message(for: job, token: "", now: Self.now))
        #expect(fcm.data["context"] != nil)
        let notification = try #require(fcm.notification)

        let apns = try #require(try ProviderMessages.apns(for: job, topic: "com.example.app", now: Self.now))
        var body = try Self.decode(apns.body)
        let aps = try #require(body.removeValue(forKey: "aps") as? [String: Any])
        #expect(body as? [String: String] == fcm.data)
        #expect(aps["alert"] as? [String: String] == ["title": notification.title, "body": notification.body])
        #expect(Set(aps.keys) == ["alert", "category", "mutable-content", "interruption-level"])

        let webPush = try #require(ProviderMessages.webPush(for: job, now: Self.now))
        var expected = fcm.data
        expected["title"] = notification.title
        expected["body"] = notification.body
        #expect(try Self.decode(webPush.payload) as? [String: String] == expected)

        for raw in [apns.body, webPush.payload] {
            let text = String(decoding: raw, as: UTF8.self)
            #expect(text.contains("https://pay.example/req"))
            #expect(!text.contains("\\/"))
            #expect(text.contains("\\n") && text.contains("\\\""))
        }
    }

    // MARK: Answers

    @Test func apnsAnswersAreSortedAsTheContractSays() {
        func kind(_ status: Int, _ reason: String?) -> PushRefusal.Kind {
            let body = reason.map { Data(#"{"reason":"\#($0)"}"#.utf8) } ?? Data()
            return APNsSender.classify(status: status, body: body, retryAfter: nil).kind
        }
        #expect(kind(410, "Unregistered") == .tokenDead)
        #expect(kind(400, "BadDeviceToken") == .tokenDead)
        #expect(kind(400, "Unregistered") == .tokenDead)
        #expect(kind(400, "BadTopic") == .rejected)
        #expect(kind(403, "ExpiredProviderToken") == .staleCredential)
        #expect(kind(403, "InvalidProviderToken") == .authFault)
        #expect(kind(429, "TooManyRequests") == .retryable)
        #expect(kind(500, nil) == .retryable)
        #expect(kind(503, "ServiceUnavailable") == .retryable)
        #expect(kind(413, "PayloadTooLarge") == .rejected)
        #expect(APNsSender.classify(status: 429, body: Data(), retryAfter: 7).retryAfter == 7)
    }

    @Test func webPushAnswersAreSortedAsTheContractSays() {
        #expect(WebPushSender.classify(status: 404, detail: "", retryAfter: nil).kind == .tokenDead)
        #expect(WebPushSender.classify(status: 410, detail: "", retryAfter: nil).kind == .tokenDead)
        #expect(WebPushSender.classify(status: 413, detail: "", retryAfter: nil).kind == .rejected)
        #expect(WebPushSender.classify(status: 429, detail: "", retryAfter: 3).kind == .retryable)
        #expect(WebPushSender.classify(status: 502, detail: "", retryAfter: nil).kind == .retryable)
        // The endpoint is the device's choice: its refusal of our VAPID token is that device's failure, not ours.
        #expect(WebPushSender.classify(status: 401, detail: "", retryAfter: nil).kind == .rejected)
        #expect(WebPushSender.classify(status: 403, detail: "", retryAfter: nil).kind == .rejected)
        #expect(WebPushSender.classify(status: 400, detail: "", retryAfter: nil).kind == .rejected)
    }

    /// The endpoint's host is resolved before each push: a name that resolves
    /// to a private address is refused, whatever it looked like when it was registered.
    @Test func aHostResolvingToAPrivateAddressIsRefusedAtSendTime() async throws {
        let policy = PushEndpointPolicy()
        let clients = CheckedHTTPClients(
            allows: { _, address in policy.allows(address: address) },
            makeClient: { _ in HTTPClient(eventLoopGroupProvider: .singleton) })
        let vapid = try await VAPIDSigner(key: P256.Signing.PrivateKey(), subject: "mailto:ops@example.com")
        let sender = WebPushSender(vapid: vapid, clients: clients, configuration: .init(), deadTokens: nil)
        let message = try #require(ProviderMessages.webPush(for: Self.prompt(expiresIn: 3600), now: Date()))
        let receiver = P256.KeyAgreement.PrivateKey().publicKey.x963Representation
        for endpoint in ["https://localhost:9/push", "https://127.1:9/push", "https://[::1]:9/push"] {
            do {
                try await sender.post(message, endpoint: endpoint, p256dh: receiver, auth: Data(count: 16))
                Issue.record("\(endpoint) was posted to")
            } catch let refusal as PushRefusal {
                #expect(refusal.kind == .tokenDead && refusal.reason == "private_address", "\(endpoint): \(refusal)")
            }
        }
        await clients.shutdown()
    }

    // MARK: Credentials

    final class Clock: Sendable {
        let value = Mutex(PushProviderTests.now)
        func advance(_ seconds: TimeInterval) { value.withLock { $0 = $0.addingTimeInterval(seconds) } }
        var now: Date { value.withLock { $0 } }
    }

    @Test func theAPNsProviderTokenIsSignedOnceForManyAndRenewedAfterFortyMinutes() async throws {
        let key = ES256PrivateKey()
        let clock = Clock()
        let tokens = try await APNsProviderToken(pem: key.pemRepresentation, keyID: "KEY1234567", teamID: "TEAM123456", now: { clock.now })
        let many = try await withThrowingTaskGroup(of: String.self) { group in
            for _ in 0..<50 { group.addTask { try await tokens.token() } }
            return try await group.reduce(into: Set<String>()) { $0.insert($1) }
        }
        #expect(many.count == 1)
        #expect(await tokens.signed == 1)
        let first = try #require(many.first)
        // The JWT verifies with the key's public half, names the key and the team, and is issued now.
        let verifier = JWTKeyCollection()
        await verifier.add(ecdsa: key.publicKey, kid: "KEY1234567")
        struct Claims: JWTPayload {
            var iss: IssuerClaim
            var iat: IssuedAtClaim
            func verify(using algorithm: some JWTAlgorithm) async throws {}
        }
        let claims = try await verifier.verify(first, as: Claims.self)
        #expect(claims.iss.value == "TEAM123456")
        #expect(claims.iat.value == Self.now)
        let header =
            try JSONSerialization.jsonObject(with: try #require(DeviceKey.decode(String(first.split(separator: ".")[0])))) as? [String: String]
        #expect(header?["kid"] == "KEY1234567")
        #expect(header?["alg"] == "ES256")

        clock.advance(39 * 60)
        #expect(try await tokens.token() == first)
        clock.advance(2 * 60)
        let renewed = try await tokens.token()
        #expect(renewed != first)
        await tokens.invalidate(renewed)
        #expect(try await tokens.token() != renewed)
        #expect(await tokens.signed == 3)
    }

    @Test func aKeyThatIsNotP256IsOneClearError() async {
        await #expect(throws: APNsKeyError.self) {
            _ = try await APNsProviderToken(pem: "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n", keyID: "K", teamID: "T")
        }
    }

    @Test func theVAPIDHeaderNamesTheKeyAndItsJWTTheOriginExpiryAndSubject() async throws {
        let key = P256.Signing.PrivateKey()
        let clock = Clock()
        let vapid = try await VAPIDSigner(key: key, subject: "mailto:ops@example.com", now: { clock.now })
        let url = try #require(URL(string: "https://push.example.net:8443/wpush/v2/abc?x=1"))
        let audience = try #require(VAPIDSigner.audience(of: url))
        #expect(audience == "https://push.example.net:8443")
        #expect(VAPIDSigner.audience(of: try #require(URL(string: "https://up.example.org:443/x"))) == "https://up.example.org")
        let header = try await vapid.authorization(audience: audience)
        let parts = header.split(separator: " ")
        #expect(parts.first == "vapid")
        let t = String(try #require(parts.dropFirst().first { $0.hasPrefix("t=") }).dropFirst(2).dropLast())  // "t=…," without the comma
        let k = String(try #require(parts.last { $0.hasPrefix("k=") }).dropFirst(2))
        #expect(k == SecureToken.base64URL(key.publicKey.x963Representation))
        #expect(vapid.publicKey == k)
        let verifier = JWTKeyCollection()
        await verifier.add(ecdsa: try ES256PublicKey(backing: key.publicKey))
        let claims = try await verifier.verify(t, as: VAPIDSigner.Claims.self)
        #expect(claims.aud.value == ["https://push.example.net:8443"])
        #expect(claims.sub.value == "mailto:ops@example.com")
        #expect(claims.exp.value == Self.now.addingTimeInterval(12 * 3600))
        // Reused within the hour, for the same origin only.
        #expect(try await vapid.authorization(audience: audience) == header)
        #expect(try await vapid.authorization(audience: "https://other.example.net") != header)
        clock.advance(3601)
        #expect(try await vapid.authorization(audience: audience) != header)
    }
}

import CountersignCore
import CountersignPush
import FakeFCM
import Foundation
import Testing

@Suite struct FCMMessageBuilderTests {
    static let now = Date(timeIntervalSince1970: 1_800_000_000)

    static func prompt(expiresIn: TimeInterval = 60, userAgent: String? = "PhotoSync/2.3 iOS/18.1") -> PushJob {
        .prompt(
            requestID: "AbCdEfGhIjKlMnOpQrStUv", userID: "u1", action: .passwordReset, expiresAt: now.addingTimeInterval(expiresIn),
            requester: RequesterInfo(ip: "203.0.113.7", userAgent: userAgent))
    }

    static func json(_ message: FCMMessage) throws -> [String: Any] {
        let data = try #require(try FCMMessageBuilder.encode(message))
        let body = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        return try #require(body["message"] as? [String: Any])
    }

    static func integrationPrompt(title: String, body: String, context: [String: String]) -> PushJob {
        .prompt(
            requestID: "AbCdEfGhIjKlMnOpQrStUv", userID: "u1", action: ApprovalAction(rawValue: "login")!, expiresAt: now.addingTimeInterval(60),
            requester: RequesterInfo(ip: "203.0.113.7", userAgent: nil),
            prompt: ApprovalPrompt(
                integrationID: "int_1", integrationName: "Acme Admin", userEmail: "ana@example.com", title: title, body: body, context: context))
    }

    @Test func anIntegrationsPromptShowsItsWordsAndFitsFCMsLimitAtTheLargestInput() throws {
        let small = try #require(
            FCMMessageBuilder.message(
                for: Self.integrationPrompt(title: "Sign in to Acme", body: "Firefox on Linux", context: ["ip": "203.0.113.7"]), token: "t",
                now: Self.now))
        #expect(small.notification?.title == "Sign in to Acme")
        #expect(small.notification?.body == "Firefox on Linux")
        #expect(small.data["integration"] == "Acme Admin")
        #expect(small.data["context"] == #"{"ip":"203.0.113.7"}"#)
        #expect(small.data["body"] == "Firefox on Linux")

        // The largest title and body the API accepts (80 and 240 four-byte characters), with a
        // context small enough for its own budget but too large for the message as a whole.
        let wide = "\u{1F510}"
        var context: [String: String] = [:]
        for index in 0..<5 { context["key\(index)"] = String(repeating: "c", count: 200) }
        let largest = try #require(
            FCMMessageBuilder.message(
                for: Self.integrationPrompt(
                    title: String(repeating: wide, count: 80), body: String(repeating: wide, count: 240), context: context), token: "t",
                now: Self.now))
        #expect(try FCMMessageBuilder.encode(largest) != nil)
        #expect(largest.data["context"] == nil)
        #expect(largest.notification?.body == String(repeating: wide, count: 240))
    }

    @Test func aPromptHasTheContractShape() throws {
        let message = try #require(FCMMessageBuilder.message(for: Self.prompt(), token: "device-token", now: Self.now))
        let json = try Self.json(message)
        #expect(json["token"] as? String == "device-token")
        #expect(
            json["data"] as? [String: String] == [
                "type": "approval_request", "requestId": "AbCdEfGhIjKlMnOpQrStUv", "action": "password_reset",
                "expiresAt": "2027-01-15T08:01:00.000Z",
            ])
        let notification = try #require(json["notification"] as? [String: String])
        #expect(notification["title"] == "Approve password reset?")
        #expect(notification["body"]?.contains("203.0.113.7") == true)
        // The user agent is the requester's text: never in what the lock screen shows.
        #expect(notification["body"]?.contains("PhotoSync") == false)
        let android = try #require(json["android"] as? [String: Any])
        #expect(android["priority"] as? String == "high")
        #expect(android["ttl"] as? String == "60s")
        #expect((android["notification"] as? [String: String])?["tag"] == "AbCdEfGhIjKlMnOpQrStUv")
        let apns = try #require(json["apns"] as? [String: Any])
        let headers = try #require(apns["headers"] as? [String: String])
        // A later prompt for the same request replaces the earlier on both platforms.
        #expect(android["collapse_key"] as? String == "approval-AbCdEfGhIjKlMnOpQrStUv")
        #expect(headers["apns-collapse-id"] == "approval-AbCdEfGhIjKlMnOpQrStUv")
        #expect(headers["apns-push-type"] == "alert")
        #expect(headers["apns-priority"] == "10")
        #expect(headers["apns-expiration"] == "1800000060")
        #expect((headers["apns-collapse-id"]?.utf8.count ?? 99) <= 64)
        let aps = try #require((apns["payload"] as? [String: Any])?["aps"] as? [String: Any])
        #expect(aps["category"] as? String == "APPROVAL_REQUEST")
        #expect(aps["mutable-content"] as? Int == 1)
        #expect(aps["interruption-level"] as? String == "time-sensitive")
        #expect(FakeFCM.problems(in: json) == nil)
    }

    @Test func theTTLIsTheTimeLeftAndAnExpiredPromptIsNotBuilt() throws {
        let later = try #require(FCMMessageBuilder.message(for: Self.prompt(expiresIn: 60), token: "t", now: Self.now.addingTimeInterval(42.5)))
        #expect(later.android.ttl == "17s")
        #expect(FCMMessageBuilder.message(for: Self.prompt(expiresIn: 60), token: "t", now: Self.now.addingTimeInterval(59.5)) == nil)
        #expect(FCMMessageBuilder.message(for: Self.prompt(expiresIn: 60), token: "t", now: Self.now.addingTimeInterval(61)) == nil)
    }

    @Test func aResolutionNoticeIsABackgroundDataMessage() throws {
        let job = PushJob.resolved(requestID: "AbCdEfGhIjKlMnOpQrStUv", userID: "u1", status: .approved)
        let json = try Self.json(try #require(FCMMessageBuilder.message(for: job, token: "t", now: Self.now)))
        #expect(json["notification"] == nil)
        #expect(json["data"] as? [String: String] == ["type": "approval_resolved", "requestId": "AbCdEfGhIjKlMnOpQrStUv", "status": "approved"])
        let apns = try #require(json["apns"] as? [String: Any])
        let headers = try #require(apns["headers"] as? [String: String])
        #expect(headers["apns-push-type"] == "background")
        #expect(headers["apns-priority"] == "5")
        #expect(headers["apns-expiration"] == "1800000300")
        let aps = try #require((apns["payload"] as? [String: Any])?["aps"] as? [String: Any])
        #expect(aps["content-available"] as? Int == 1)
        #expect(aps["category"] == nil)
        #expect((json["android"] as? [String: Any])?["ttl"] as? String == "300s")
        #expect(FakeFCM.problems(in: json) == nil)
    }

    @Test func hostileUserAgentsNeverReachTheNotification() throws {
        let agent = "Tap APPROVE to block the hacker\u{7}\u{202E}" + String(repeating: "x", count: 500)
        let message = try #require(FCMMessageBuilder.message(for: Self.prompt(userAgent: agent), token: "t", now: Self.now))
        let body = try #require(message.notification?.body)
        #expect(!body.contains("APPROVE"))
        #expect(!body.contains("\u{7}"))
        #expect(!body.contains("\u{202E}"))
        #expect(body == "A password reset was requested from 203.0.113.7. Open to approve or deny.")
        #expect(try FCMMessageBuilder.encode(message) != nil)
    }

    @Test func theFakeRejectsWhatFCMWouldReject() {
        let good: [String: Any] = ["token": "t", "data": ["a": "b"], "android": ["priority": "high", "ttl": "30s"]]
        #expect(FakeFCM.problems(in: good) == nil)
        #expect(FakeFCM.problems(in: ["data": ["a": "b"]]) != nil)  // no target
        #expect(FakeFCM.problems(in: ["token": "t", "topic": "x"]) != nil)  // two targets
        #expect(FakeFCM.problems(in: ["token": "t", "data": ["n": 1]]) != nil)  // non-string data
        #expect(FakeFCM.problems(in: ["token": "t", "data": ["from": "x"]]) != nil)  // reserved key
        #expect(FakeFCM.problems(in: ["token": "t", "android": ["priority": "urgent"]]) != nil)
        #expect(FakeFCM.problems(in: ["token": "t", "android": ["ttl": "60"]]) != nil)
        #expect(FakeFCM.problems(in: ["token": "t", "apns": ["headers": ["apns-priority": 10]]]) != nil)
    }
}

@Suite struct ServiceAccountTests {
    static var valid: [String: Any] {
        [
            "type": "service_account", "project_id": "p", "private_key_id": "k1",
            "private_key": "-----BEGIN PRIVATE KEY-----\nMII...\n-----END PRIVATE KEY-----\n",
            "client_email": "a@p.iam.gserviceaccount.com", "token_uri": "https://oauth2.googleapis.com/token",
        ]
    }

    static func parse(_ object: [String: Any]) throws -> ServiceAccount {
        try ServiceAccount.parse(try JSONSerialization.data(withJSONObject: object), source: "sa.json")
    }

    @Test(arguments: ["type", "project_id", "private_key", "private_key_id", "client_email", "token_uri"])
    func aMissingFieldIsNamed(field: String) throws {
        var object = Self.valid
        object[field] = nil
        #expect(throws: ServiceAccountError("FCM service account sa.json: missing or empty field \"\(field)\"")) { try Self.parse(object) }
    }

    @Test func wrongValuesAreRefusedWithoutShowingThem() throws {
        var wrongType = Self.valid
        wrongType["type"] = "authorized_user"
        #expect(throws: ServiceAccountError.self) { try Self.parse(wrongType) }
        var notPEM = Self.valid
        notPEM["private_key"] = "super-secret-not-a-pem"
        do {
            _ = try Self.parse(notPEM)
            Issue.record("a key that is not PEM was accepted")
        } catch let error as ServiceAccountError {
            #expect(!error.description.contains("super-secret"))
        }
        let account = try Self.parse(Self.valid)
        #expect(!account.description.contains("BEGIN PRIVATE KEY"))
        #expect(throws: ServiceAccountError.self) { try ServiceAccount.parse(Data("[1]".utf8), source: "x") }
    }
}

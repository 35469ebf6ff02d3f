import CountersignCore
import CountersignWire
import Crypto
import Foundation
import NIOCore
import TestSupport
import Testing

@testable import CountersignPush

/// sealed-push.md: FCM and APNs messages sealed to a device's key (HPKE, swift-crypto),
/// opened by a receiver no one here wrote (PyPI's pyhpke, `scripts/hpke-open.py`).
@Suite struct SealedPushTests {
    static let now = Date(timeIntervalSince1970: 1_800_000_000)
    static let requestID = "AbCdEfGhIjKlMnOpQrStUv"
    /// What must never be readable in a sealed message: who, where, what for.
    static let secrets = ["ana@example.com", "Acme Payroll", "Pay 5,000 EUR to Bob", "203.0.113.7", "Berlin", "PhotoSync"]

    static func integrationPrompt() -> PushJob {
        .prompt(
            requestID: requestID, userID: "u1", action: ApprovalAction(rawValue: "payment")!, expiresAt: now.addingTimeInterval(60),
            requester: RequesterInfo(ip: "203.0.113.7", userAgent: "PhotoSync/2.3"),
            prompt: ApprovalPrompt(
                integrationID: "i1", integrationName: "Acme Payroll", userEmail: "ana@example.com", title: "Pay 5,000 EUR to Bob",
                body: "Requested from 203.0.113.7 in Berlin", context: ["ip": "203.0.113.7", "location": "Berlin, DE"]))
    }

    static func resetPrompt() -> PushJob {
        .prompt(
            requestID: requestID, userID: "u1", action: .passwordReset, expiresAt: now.addingTimeInterval(60),
            requester: RequesterInfo(ip: "203.0.113.7", userAgent: "PhotoSync/2.3"))
    }

    /// What pyhpke makes of `sealed` with the device's private key and `aad`: the plaintext, or nil when it does not open.
    static func pyhpkeOpen(_ sealed: String, key: P256.KeyAgreement.PrivateKey, aad: String) async throws -> String? {
        try await PyHPKE.open(sealed, privateKeyPEM: key.pemRepresentation, aad: aad)
    }

    static func json(_ text: String?) throws -> [String: String] {
        let text = try #require(text, "not opened")
        return try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: String])
    }

    @Test func aSealedFCMPromptOpensWithPyHPKEToTheReadablePayloadAndShowsNothingOfTheUser() async throws {
        let device = P256.KeyAgreement.PrivateKey()
        let key = SealKey(publicKey: device.publicKey)
        for job in [Self.integrationPrompt(), Self.resetPrompt()] {
            let readable = try #require(FCMMessageBuilder.message(for: job, token: "token-1", now: Self.now))
            let sealed = try SealedMessages.form(of: readable, key: key)
            #expect(Set(sealed.data.keys) == ["type", "requestId", "sealed", "v"])
            #expect(sealed.data["type"] == "approval_request" && sealed.data["requestId"] == Self.requestID && sealed.data["v"] == "1")
            #expect(sealed.notification == nil && sealed.android.notification == nil, "a data message: the app shows the prompt")
            // iOS through FCM: the alert push carries the generic alert, so iOS shows it and the extension runs.
            #expect(sealed.apns.payload.aps.alert == SealedMessages.genericAlert && sealed.apns.payload.aps.mutableContent == 1)
            let bytes = String(decoding: Data(try FCMMessageBuilder.body(of: sealed).readableBytesView), as: UTF8.self)
            for secret in Self.secrets { #expect(!bytes.contains(secret), "\(secret) readable in \(bytes)") }

            // pyhpke, with info "countersign push v1" and the request's id as aad: the readable payload.
            let opened = try await Self.pyhpkeOpen(try #require(sealed.data["sealed"]), key: device, aad: Self.requestID)
            #expect(try Self.json(opened) == SealedMessages.appPayload(of: readable))
            // Bound to its request, and to this key.
            #expect(try await Self.pyhpkeOpen(try #require(sealed.data["sealed"]), key: device, aad: "") == nil)
            #expect(try await Self.pyhpkeOpen(try #require(sealed.data["sealed"]), key: P256.KeyAgreement.PrivateKey(), aad: Self.requestID) == nil)
            // Two pushes of one prompt differ: a fresh encapsulation each.
            let again = try SealedMessages.form(of: readable, key: key)
            #expect(again.data["sealed"] != sealed.data["sealed"])
        }
        // What the app's payload holds: the prompt's words, as a readable push would show them.
        let payload = SealedMessages.appPayload(of: try #require(FCMMessageBuilder.message(for: Self.integrationPrompt(), token: "t", now: Self.now)))
        #expect(payload["title"] == "Pay 5,000 EUR to Bob" && payload["integration"] == "Acme Payroll" && payload["expiresAt"] != nil)
        #expect(payload["numberCode"] == nil, "the number code never travels in a push")
    }

    @Test func noticesAreSealedToo() async throws {
        let device = P256.KeyAgreement.PrivateKey()
        let key = SealKey(publicKey: device.publicKey)
        let resolved = try #require(
            FCMMessageBuilder.message(for: .resolved(requestID: Self.requestID, userID: "u1", status: .approved), token: "t", now: Self.now))
        let sealedResolved = try SealedMessages.form(of: resolved, key: key)
        #expect(
            try Self.json(try await Self.pyhpkeOpen(try #require(sealedResolved.data["sealed"]), key: device, aad: Self.requestID)) == resolved.data)
        let added = try #require(
            FCMMessageBuilder.message(
                for: .deviceAdded(userID: "u1", deviceID: "d2", deviceName: "Ana's new phone", platform: "android", at: Self.now), token: "t",
                now: Self.now))
        let sealedAdded = try SealedMessages.form(of: added, key: key)
        #expect(Set(sealedAdded.data.keys) == ["type", "sealed", "v"])
        // A notice without a request is bound to "".
        #expect(try Self.json(try await Self.pyhpkeOpen(try #require(sealedAdded.data["sealed"]), key: device, aad: "")) == added.data)
        #expect(!String(decoding: Data(try FCMMessageBuilder.body(of: sealedAdded).readableBytesView), as: UTF8.self).contains("Ana's new phone"))
    }

    @Test func underRequiredADeviceWithoutAKeyGetsTheTypeAndRequestAlone() throws {
        let readable = try #require(FCMMessageBuilder.message(for: Self.integrationPrompt(), token: "t", now: Self.now))
        let bare = try SealedMessages.form(of: readable, key: nil)
        #expect(bare.data == ["type": "approval_request", "requestId": Self.requestID])
        #expect(bare.notification == nil)
        let keyless = Device(id: "d", userID: "u", name: "n", platform: "ios", push: .fcm("t"), pushEnabled: true, createdAt: Self.now)
        #expect(SealedMessages.applies(to: keyless, policy: .required))
        #expect(!SealedMessages.applies(to: keyless, policy: .optional))
        var keyed = keyless
        keyed.sealKey = SealKey(publicKey: P256.KeyAgreement.PrivateKey().publicKey)
        #expect(SealedMessages.applies(to: keyed, policy: .optional))
        #expect(!SealedMessages.applies(to: keyed, policy: .off))

        let apns = try #require(
            try ProviderMessages.apns(for: Self.integrationPrompt(), topic: "com.example.app", now: Self.now, seal: .init(key: nil)))
        let payload = try #require(try JSONSerialization.jsonObject(with: apns.body) as? [String: Any])
        #expect(Set(payload.keys) == ["aps", "type", "requestId"])
        let aps = try #require(payload["aps"] as? [String: Any])
        #expect(aps["alert"] as? [String: String] == SealedMessages.genericAlert)
        let text = String(decoding: apns.body, as: UTF8.self)
        for secret in Self.secrets { #expect(!text.contains(secret), "\(secret) readable in \(text)") }
    }

    @Test func aSealedAPNsPromptHasAGenericAlertForTheExtensionToReplace() async throws {
        let device = P256.KeyAgreement.PrivateKey()
        let apns = try #require(
            try ProviderMessages.apns(
                for: Self.integrationPrompt(), topic: "com.example.app", now: Self.now,
                seal: .init(key: SealKey(publicKey: device.publicKey))))
        let payload = try #require(try JSONSerialization.jsonObject(with: apns.body) as? [String: Any])
        #expect(Set(payload.keys) == ["aps", "type", "requestId", "sealed", "v"])
        let aps = try #require(payload["aps"] as? [String: Any])
        #expect(
            aps["alert"] as? [String: String] == ["title": "Approval request", "body": "Open to see it.", "loc-key": "COUNTERSIGN_APPROVAL_REQUEST"])
        #expect(aps["mutable-content"] as? Int == 1, "the notification service extension opens it")
        let text = String(decoding: apns.body, as: UTF8.self)
        for secret in Self.secrets { #expect(!text.contains(secret), "\(secret) readable in \(text)") }
        let readable = try #require(FCMMessageBuilder.message(for: Self.integrationPrompt(), token: "", now: Self.now))
        let opened = try await Self.pyhpkeOpen(try #require(payload["sealed"] as? String), key: device, aad: Self.requestID)
        #expect(try Self.json(opened) == SealedMessages.appPayload(of: readable))
    }

    /// sealed-push.md: "the payload stays within FCM's and APNs' 4 KiB". Sealing adds the
    /// encapsulated key, the tag and base64url's third; over the sizes of title, body and context
    /// the API accepts, up to the largest, the sealed form still fits both and opens to the
    /// readable payload (less the context wherever sealing had to drop it to fit; within the
    /// API's limits the readable form drops it first). pyhpke opens the largest.
    @Test func everyPromptSealedFitsFCMAndAPNsAndOpensToItsWords() async throws {
        let device = P256.KeyAgreement.PrivateKey()
        let key = SealKey(publicKey: device.publicKey)
        var largest: (sealed: String, expected: [String: String])?
        for character in ["a", "\u{1F510}"] {
            for bodyLength in stride(from: 150, through: 240, by: 10) {
                for contextBytes in stride(from: 0, through: FCMMessageBuilder.maximumContextBytes, by: 100) {
                    let context = contextBytes == 0 ? [:] : ["note": String(repeating: "c", count: contextBytes - 12)]
                    let job = PushJob.prompt(
                        requestID: Self.requestID, userID: "u1", action: ApprovalAction(rawValue: "login")!,
                        expiresAt: Self.now.addingTimeInterval(60), requester: RequesterInfo(ip: "203.0.113.7", userAgent: nil),
                        prompt: ApprovalPrompt(
                            integrationID: "i1", integrationName: String(repeating: "n", count: 64), userEmail: "ana@example.com",
                            title: String(repeating: character, count: 80), body: String(repeating: character, count: bodyLength),
                            context: context))
                    let readable = try #require(FCMMessageBuilder.message(for: job, token: String(repeating: "t", count: 200), now: Self.now))
                    let sealed = try SealedMessages.form(of: readable, key: key)
                    #expect(try FCMMessageBuilder.encode(sealed) != nil, "body \(bodyLength), context \(contextBytes): over FCM's limit")
                    let apns = try #require(try ProviderMessages.apns(for: job, topic: "com.example.app", now: Self.now, seal: .init(key: key)))
                    #expect(apns.body.count <= ProviderMessages.apnsMaximumBytes, "\(apns.body.count) bytes for APNs")

                    var expected = SealedMessages.appPayload(of: readable)
                    let part = try #require(sealed.data["sealed"])
                    let opened = try Self.json(String(decoding: try PushSeal.open(part, with: device, aad: Self.requestID), as: UTF8.self))
                    if opened["context"] == nil { expected["context"] = nil }
                    #expect(opened == expected)
                    if character != "a", bodyLength == 240, contextBytes == FCMMessageBuilder.maximumContextBytes { largest = (part, expected) }
                    #expect(opened["title"] == String(repeating: character, count: 80))
                    #expect(opened["body"] == String(repeating: character, count: bodyLength))
                }
            }
        }
        let (sealed, expected) = try #require(largest)
        #expect(try Self.json(try await Self.pyhpkeOpen(sealed, key: device, aad: Self.requestID)) == expected)
    }

    @Test func aSealKeyMustBeAnUncompressedPointOnTheCurve() throws {
        let point = P256.KeyAgreement.PrivateKey().publicKey.x963Representation
        #expect(try SealKey(base64URL: SecureToken.base64URL(point)).point == point)
        #expect(throws: SealKey.Invalid.malformed) { try SealKey(base64URL: SecureToken.base64URL(point.prefix(33))) }
        #expect(throws: SealKey.Invalid.malformed) { try SealKey(base64URL: "not base64url!") }
        var offCurve = point
        offCurve[64] ^= 0x01
        #expect(throws: SealKey.Invalid.notOnCurve) { try SealKey(base64URL: SecureToken.base64URL(offCurve)) }
        // Its thumbprint is the RFC 7638 one of the same point as a JWK.
        let key = try SealKey(base64URL: SecureToken.base64URL(point))
        let jwk = DeviceKey(publicKey: try P256.Signing.PublicKey(x963Representation: point))
        #expect(key.thumbprint == jwk.thumbprint)
    }
}

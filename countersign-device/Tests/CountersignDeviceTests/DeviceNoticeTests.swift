import CountersignDevice
import CountersignWire
import Crypto
import Foundation
import Testing

/// One push, as each way an app receives it: FCM's data, an APNs notification's
/// `userInfo`, a Web Push payload, and sealed; all give the same notice.
@Suite struct DeviceNoticeTests {
    static let data = [
        "type": "approval_request", "requestId": "r1", "action": "payment", "expiresAt": "2026-12-02T10:00:00Z", "title": "Pay 5 EUR?",
        "body": "To Acme", "integration": "Acme", "context": #"{"ip":"203.0.113.7"}"#,
    ]

    @Test func everyFormOfOnePushGivesTheSameNotice() throws {
        let expected = DeviceNotice.approvalRequest(
            PromptNotice(
                requestID: "r1", action: "payment", expiresAt: "2026-12-02T10:00:00Z", title: "Pay 5 EUR?", body: "To Acme", integration: "Acme",
                context: ["ip": "203.0.113.7"]))
        #expect(DeviceNotice(pushData: Self.data) == expected)
        var userInfo: [AnyHashable: Any] = ["aps": ["alert": ["title": "Pay 5 EUR?", "body": "To Acme"], "category": "APPROVAL_REQUEST"]]
        for (key, value) in Self.data { userInfo[key] = value }
        #expect(DeviceNotice(userInfo: userInfo) == expected)
        #expect(DeviceNotice(webPushPayload: try JSONSerialization.data(withJSONObject: Self.data)) == expected)

        let key = P256.KeyAgreement.PrivateKey()
        let sealed = try PushSeal.seal(try JSONSerialization.data(withJSONObject: Self.data), to: SealKey(publicKey: key.publicKey), aad: "r1")
        let push = ["type": "approval_request", "requestId": "r1", "sealed": sealed, "v": "1"]
        #expect(DeviceNotice(sealedPushData: push, sealKey: key) == expected)
        var sealedUserInfo: [AnyHashable: Any] = ["aps": ["alert": ["title": "Approval request"], "mutable-content": 1]]
        for (name, value) in push { sealedUserInfo[name] = value }
        #expect(DeviceNotice(userInfo: sealedUserInfo, sealKey: key) == expected)

        // Bound to its request: the same sealed part under another request id does not open.
        var moved = push
        moved["requestId"] = "r2"
        #expect(DeviceNotice(sealedPushData: moved, sealKey: key) == nil)
        // Another key opens nothing; without a key, a sealed push is no notice.
        #expect(DeviceNotice(sealedPushData: push, sealKey: P256.KeyAgreement.PrivateKey()) == nil)
        #expect(DeviceNotice(pushData: push) == nil)
    }

    /// `--sealed-push required` and a device without a sealing key: the generic alert and the request's id alone
    /// (through FCM, with FCM's own members beside them) say "a request waits", nothing more.
    @Test func aBarePromptIsARequestToReadAndSealedOnlyRefusesReadableOnes() {
        let bare: [AnyHashable: Any] = [
            "aps": ["alert": ["title": "Approval request", "body": "Open to see it."], "mutable-content": 1], "type": "approval_request",
            "requestId": "r1", "gcm.message_id": "1", "google.c.a.e": "1",
        ]
        #expect(DeviceNotice(userInfo: bare) == .approvalWaiting(requestID: "r1"))
        let key = P256.KeyAgreement.PrivateKey()
        #expect(DeviceNotice(userInfo: bare, sealKey: key, sealedOnly: true) == .approvalWaiting(requestID: "r1"))
        // A readable prompt is taken, unless the app insists on sealed ones.
        #expect(DeviceNotice(sealedPushData: Self.data, sealKey: key) == DeviceNotice(pushData: Self.data))
        #expect(DeviceNotice(sealedPushData: Self.data, sealKey: key, sealedOnly: true) == nil)
    }

    @Test func thePromptsNotificationIdentifierIsItsCollapseID() {
        #expect(DeviceNotice.notificationID("r1") == "approval-r1")
        #expect(DeviceNotice.notificationID(String(repeating: "a", count: 64)) == "approval-" + String(repeating: "a", count: 40))
    }

    @Test func storesKeepTheirSignerAndSealingKeyAndFilesAreOwnerOnly() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("countersign-device-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appendingPathComponent("device.json").path
        let first = FileKeyStore(path: path)
        let signing = try await first.signer().publicKey().rawRepresentation
        let sealing = try await first.sealingKey().publicKey.rawRepresentation
        #expect(signing != sealing, "one key, one use")
        let again = FileKeyStore(path: path)
        #expect(try await again.signer().publicKey().rawRepresentation == signing)
        #expect(try await again.sealingKey().publicKey.rawRepresentation == sealing)
        let mode = try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int
        #expect(mode == 0o600)
    }
}

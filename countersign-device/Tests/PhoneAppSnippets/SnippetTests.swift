import CountersignDevice
import CountersignWire
import Crypto
import Foundation
import Testing

#if canImport(UserNotifications)
import UserNotifications
#endif

/// The snippets run: what docs/phone-app.md shows does what it says.
@Suite(.serialized) struct SnippetTests {
    @Test func theNotificationServiceShowsASealedPromptsWords() throws {
        let key = P256.KeyAgreement.PrivateKey()
        AppKeys.sealingKey = key
        let readable = [
            "type": "approval_request", "requestId": "r1", "action": "login", "expiresAt": "2026-12-02T10:00:00Z", "title": "Sign in to Acme?",
            "body": "From Lisbon",
        ]
        let sealed = try PushSeal.seal(
            try JSONSerialization.data(withJSONObject: readable), to: SealKey(publicKey: key.publicKey), aad: "r1")
        let content = UNMutableNotificationContent()
        content.title = "Approval request"
        content.userInfo = [
            "aps": ["alert": ["title": "Approval request"], "mutable-content": 1], "type": "approval_request", "requestId": "r1",
            "sealed": sealed, "v": "1",
        ]
        var shown: UNNotificationContent?
        NotificationService().didReceive(UNNotificationRequest(identifier: "approval-r1", content: content, trigger: nil)) { shown = $0 }
        #expect(shown?.title == "Sign in to Acme?" && shown?.body == "From Lisbon")

        // Another key opens nothing: the generic alert stays.
        AppKeys.sealingKey = P256.KeyAgreement.PrivateKey()
        NotificationService().didReceive(UNNotificationRequest(identifier: "approval-r1", content: content, trigger: nil)) { shown = $0 }
        #expect(shown?.title == "Approval request")
    }

    @Test func anEnclaveSignerSignsWhatItsPublicKeyVerifies() async throws {
        let signer = EnclaveSigner(key: try SecureEnclave.P256.Signing.PrivateKey())
        let message = Data("header.payload".utf8)
        let signature = try await signer.signature(for: message)
        #expect(try await signer.publicKey().isValidSignature(signature, for: message))
    }

    @Test func aWebPushMessageAndAResolvedPromptAreHandled() throws {
        let payload = try JSONSerialization.data(withJSONObject: ["type": "approval_resolved", "requestId": "r2", "status": "approved"])
        let notice = try #require(onMessage(payload))
        #expect(notice == .approvalResolved(requestID: "r2", status: "approved"))
        // The notification center is the stand-in's here; a test runner on an Apple platform has no app to take it from.
        #if !canImport(UserNotifications)
        handle(notice)
        #expect(UNUserNotificationCenter.current().removed.last == "approval-r2")
        registerPromptCategory()
        #expect(UNUserNotificationCenter.current().categories.map(\.identifier) == ["APPROVAL_REQUEST"])
        #endif
    }
}

// The Swift snippets of docs/phone-app.md, each between `// snippet:` and
// `// end snippet`, word for word (scripts/check-doc-snippets.py compares them).
import CountersignDevice
import Crypto
import Foundation

#if canImport(UserNotifications)
import UserNotifications
#endif

/// What the snippets take from the app: where it keeps its keys and credentials.
enum AppKeys {
    static let store = MemoryKeyStore()
    /// The sealing key, as the app reads it from the Keychain shared with its extension.
    nonisolated(unsafe) static var sealingKey: P256.KeyAgreement.PrivateKey?
    static func sealingKeyFromKeychain() -> P256.KeyAgreement.PrivateKey? { sealingKey }
}

// snippet: sign-in-and-answer
func signInAndAnswer(password: String, typedNumber: () -> String?) async throws {
    let device = CountersignDevice(baseURL: "https://auth.example.com", store: AppKeys.store)
    if try await device.credentials() == nil {
        try await device.signIn(email: "ana@example.com", password: password, name: "Ana's phone", platform: "ios")
    }
    for approval in try await device.waitForPending(timeout: .seconds(30)) {
        // Show approval.title, approval.action, approval.requester.ip; ask for the number when approval.numberMatching.
        try await device.answer(approval.requestId, .approve, numberCode: approval.numberMatching ? typedNumber() : nil)
    }
}
// end snippet

// snippet: enclave-signer
/// Answers and proofs signed in the Secure Enclave: the key never leaves it, and the
/// library sees only its public half and its signatures.
struct EnclaveSigner: DeviceSigner {
    let key: SecureEnclave.P256.Signing.PrivateKey

    func publicKey() async throws -> P256.Signing.PublicKey { key.publicKey }

    func signature(for message: Data) async throws -> P256.Signing.ECDSASignature {
        try key.signature(for: message)
    }
}
// end snippet

// snippet: notification-service
/// The notification service extension: opens a sealed prompt and shows its real words.
final class NotificationService: UNNotificationServiceExtension {
    override func didReceive(_ request: UNNotificationRequest, withContentHandler contentHandler: @escaping (UNNotificationContent) -> Void) {
        guard let content = request.content.mutableCopy() as? UNMutableNotificationContent else { return contentHandler(request.content) }
        let key = AppKeys.sealingKeyFromKeychain()
        if case .approvalRequest(let prompt)? = DeviceNotice(userInfo: request.content.userInfo, sealKey: key) {
            content.title = prompt.title ?? content.title
            content.body = prompt.body ?? content.body
        }
        contentHandler(content)
    }
}
// end snippet

// snippet: present-and-dismiss
/// At launch: the category the daemon names in each prompt (`APPROVAL_REQUEST`), with its two answers.
func registerPromptCategory() {
    let approve = UNNotificationAction(identifier: "APPROVE", title: "Approve", options: [.authenticationRequired, .foreground])
    let deny = UNNotificationAction(identifier: "DENY", title: "Deny", options: [.destructive])
    let category = UNNotificationCategory(identifier: "APPROVAL_REQUEST", actions: [approve, deny], intentIdentifiers: [])
    UNUserNotificationCenter.current().setNotificationCategories([category])
}

/// A notice arrived (a background push): take down a prompt answered elsewhere, expired or cancelled.
func handle(_ notice: DeviceNotice) {
    if case .approvalResolved(let requestID, _) = notice {
        UNUserNotificationCenter.current().removeDeliveredNotifications(withIdentifiers: [DeviceNotice.notificationID(requestID)])
    }
}
// end snippet

// snippet: unifiedpush
/// The UnifiedPush connector's callbacks: a new endpoint replaces the old one at the daemon;
/// unregistered, the device falls back to asking (pull only) until it has an address again.
func onNewEndpoint(_ device: CountersignDevice, endpoint: String, p256dh: String, auth: String) async throws {
    try await device.updatePush(.webPush(endpoint: endpoint, p256dh: p256dh, auth: auth))
}

func onUnregistered(_ device: CountersignDevice) async throws {
    try await device.updatePush(nil)
}

/// A message: the distributor hands over the decrypted payload.
func onMessage(_ payload: Data) -> DeviceNotice? {
    DeviceNotice(webPushPayload: payload)
}
// end snippet

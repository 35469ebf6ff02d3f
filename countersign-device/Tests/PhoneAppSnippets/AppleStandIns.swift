// Stand-ins for the Apple frameworks the snippets use, with the same names and
// signatures, so that CI (Linux, no Apple SDK) compiles the snippets against the
// library. On Apple platforms the real frameworks are used instead.
import Crypto
import Foundation

#if !canImport(UserNotifications)
class UNNotificationContent: @unchecked Sendable {
    var title = ""
    var body = ""
    var userInfo: [AnyHashable: Any] = [:]
    func mutableCopy() -> Any {
        let copy = UNMutableNotificationContent()
        copy.title = title
        copy.body = body
        copy.userInfo = userInfo
        return copy
    }
}

final class UNMutableNotificationContent: UNNotificationContent, @unchecked Sendable {}

final class UNNotificationRequest: @unchecked Sendable {
    let identifier: String
    let content: UNNotificationContent
    init(identifier: String, content: UNNotificationContent, trigger: Never?) {
        self.identifier = identifier
        self.content = content
    }
}

class UNNotificationServiceExtension {
    func didReceive(_ request: UNNotificationRequest, withContentHandler contentHandler: @escaping (UNNotificationContent) -> Void) {}
    func serviceExtensionTimeWillExpire() {}
}

struct UNNotificationActionOptions: OptionSet {
    let rawValue: Int
    static let authenticationRequired = UNNotificationActionOptions(rawValue: 1)
    static let destructive = UNNotificationActionOptions(rawValue: 2)
    static let foreground = UNNotificationActionOptions(rawValue: 4)
}

struct UNNotificationAction {
    let identifier: String
    let title: String
    let options: UNNotificationActionOptions
    init(identifier: String, title: String, options: UNNotificationActionOptions = []) {
        self.identifier = identifier
        self.title = title
        self.options = options
    }
}

struct UNNotificationCategory: Hashable {
    let identifier: String
    init(identifier: String, actions: [UNNotificationAction], intentIdentifiers: [String]) {
        self.identifier = identifier
    }
}

final class UNUserNotificationCenter: @unchecked Sendable {
    private static let shared = UNUserNotificationCenter()
    static func current() -> UNUserNotificationCenter { shared }
    private(set) var categories: Set<UNNotificationCategory> = []
    private(set) var removed: [String] = []
    func setNotificationCategories(_ categories: Set<UNNotificationCategory>) { self.categories = categories }
    func removeDeliveredNotifications(withIdentifiers identifiers: [String]) { removed += identifiers }
}
#endif

#if !canImport(CryptoKit)
/// The Secure Enclave's P-256 signing key, as CryptoKit shapes it (here: a key in memory).
enum SecureEnclave {
    enum P256 {
        enum Signing {
            struct PrivateKey: Sendable {
                private let key: Crypto.P256.Signing.PrivateKey
                init() throws { key = Crypto.P256.Signing.PrivateKey() }
                init(dataRepresentation: Data) throws { key = try Crypto.P256.Signing.PrivateKey(rawRepresentation: dataRepresentation) }
                var dataRepresentation: Data { key.rawRepresentation }
                var publicKey: Crypto.P256.Signing.PublicKey { key.publicKey }
                func signature(for data: some DataProtocol) throws -> Crypto.P256.Signing.ECDSASignature { try key.signature(for: data) }
            }
        }
    }
}
#endif

import CountersignCore
import Foundation
import Hummingbird
import Logging

/// `POST /api/mobile/auth/enroll`: a device signs in with the one-time code
/// an integration issued, instead of a password, and gets the login answer.
struct EnrollmentController: Sendable {
    let store: any IntegrationStore & DeviceAccountStore
    let keys: SecretKeys
    let abuse: AbuseGuard
    let audit: AuditLog
    let deviceKeys: DeviceKeyPolicy

    func addRoutes(to group: RouterGroup<AppRequestContext>) {
        group.post("auth/enroll", use: enroll)
    }

    struct EnrollBody: Decodable {
        var enrollmentCode: String
        var deviceName: String
        var platform: String
        var fcmToken: String?
        var publicKey: JWKMembers?
    }

    @Sendable func enroll(_ request: Request, context: AppRequestContext) async throws -> MobileAuthController.LoginAnswer {
        let body = try await request.decodeJSON(as: EnrollBody.self, context: context)
        let typed = body.enrollmentCode
        let deviceName = try Field.text(body.deviceName, "deviceName", maxBytes: 100)
        let platform = try Field.text(body.platform, "platform", maxBytes: 32)
        let token = try body.fcmToken.map { try Field.text($0, "fcmToken", maxBytes: 4096, allowEmpty: true) }
        // With device keys off, a key sent is ignored, not checked.
        let key = deviceKeys == .off ? nil : try body.publicKey.map { try Field.deviceKey($0, "publicKey") }
        // Counted before the code is looked at, so that parallel guesses cannot pass the limit; given back on success.
        var redeemed: (userID: String, integrationID: String)?
        let accepted = try await abuse.attempt(
            against: [(.enrollFailuresPerIP, context.clientKey)], "Too many wrong enrollment codes. Please try again later.", context: context,
            request: request
        ) {
            // Anything that cannot be a code is a wrong code: same answer, counted alike.
            guard typed.utf8.count <= 64, let code = EnrollmentCode.normalize(typed) else { return false }
            redeemed = try await store.redeemEnrollment(codeHash: EnrollmentCode.hash(code, keys: keys), now: Date())
            return redeemed != nil
        }
        guard accepted, let redeemed, let user = try await store.user(id: redeemed.userID) else {
            context.logger.notice("enrollment refused: code not valid", metadata: ["ip": "\(context.clientIP)"])
            audit.record(AuditEvent(kind: .enrollmentRefused, context: request.auditContext(context), detail: "code not valid"))
            throw APIError.invalidEnrollmentCode
        }
        let apiKey = SecureToken.apiKey()
        let device = try await store.registerDevice(
            userID: user.id, name: deviceName, platform: platform, fcmToken: Device.pushToken(from: token),
            apiKeyHash: SecureToken.sha256Hex(apiKey), publicKey: key)
        let integration = try await store.integration(id: redeemed.integrationID)
        context.logger.info("device enrolled", metadata: ["user": "\(user.id)", "device": "\(device.id)", "push": "\(device.pushEnabled)"])
        audit.record(
            AuditEvent(
                kind: .deviceEnrolled, userID: user.id, context: request.auditContext(context, deviceID: device.id),
                detail: "integration \(integration?.name ?? redeemed.integrationID)"
                    + (device.fcmToken.map { "; push token \(Device.tokenSuffix($0))" } ?? "; pull only")
                    + (device.publicKey.map { "; key \($0.thumbprint)" } ?? "")))
        return MobileAuthController.LoginAnswer(
            user: .init(id: user.id, email: user.email),
            device: .init(
                id: device.id, name: device.name, platform: device.platform, pushEnabled: device.pushEnabled, keyBound: device.publicKey != nil),
            apiKey: apiKey)
    }
}

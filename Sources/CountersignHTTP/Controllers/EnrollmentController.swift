import CountersignCore
import Foundation
import Hummingbird
import Logging

/// `POST /api/mobile/auth/enroll`: a device signs in with the one-time code
/// an integration issued, instead of a password, and gets the login answer.
struct EnrollmentController: Sendable {
    let store: any IntegrationStore & DeviceAccountStore
    let keys: SecretKeys
    let abuse: RateLimitGuard
    let audit: AuditLog
    let deviceKeys: DeviceKeyPolicy
    let arrivals: DeviceArrivals
    let offline: OfflineSecrets
    let pushEndpoints: PushEndpointPolicy
    let pushOffer: PushOffer

    func addRoutes(to group: RouterGroup<AppRequestContext>) {
        group.post("auth/enroll", use: enroll)
    }

    struct EnrollBody: Decodable {
        var enrollmentCode: String
        var deviceName: String
        var platform: String
        var fcmToken: String?
        var push: PushAddressBody?
        var publicKey: JWKMembers?
        /// The key its FCM and APNs pushes are sealed to (base64url P-256 point).
        var sealKey: String?
    }

    @Sendable func enroll(_ request: Request, context: AppRequestContext) async throws -> MobileAuthController.LoginResponse {
        let body = try await request.decodeJSON(as: EnrollBody.self, context: context)
        let typed = body.enrollmentCode
        let deviceName = try Field.name(body.deviceName, "deviceName", maxBytes: 100)
        let platform = try Field.name(body.platform, "platform", maxBytes: 32)
        let push = try Field.pushAddress(push: body.push, fcmToken: body.fcmToken, policy: pushEndpoints)
        // With device keys off, a key sent is ignored, not checked.
        let key = deviceKeys == .off ? nil : try body.publicKey.map { try Field.deviceKey($0, "publicKey") }
        let sealKey = try body.sealKey.map(Field.sealKey)
        let apiKey = SecureToken.apiKey()
        let apiKeyHash = SecureToken.sha256Hex(apiKey)
        let secret = try offline.issue()
        let sealedSecret = secret?.sealed
        let maxDevices = arrivals.maxPerUser
        // Counted before the code is looked at, so that parallel guesses cannot pass the limit; given back on success.
        var enrolled: (device: Device, integrationID: String)?
        var refusal: APIError?
        let accepted = try await abuse.attempt(
            against: [(.enrollFailuresPerIP, context.clientKey)], "Too many wrong enrollment codes. Please try again later.", context: context,
            request: request
        ) {
            // Anything that cannot be a code is a wrong code: same answer, counted alike.
            guard typed.utf8.count <= 64, let code = EnrollmentCode.normalize(typed) else { return false }
            do {
                // The code is used and the device registered in one transaction: a refusal leaves the code usable.
                enrolled = try await store.enroll(codeHash: EnrollmentCode.hash(code, keys: keys), now: Date(), maxDevices: maxDevices) { userID in
                    DeviceRegistration(
                        userID: userID, name: deviceName, platform: platform, push: push, apiKeyHash: apiKeyHash, publicKey: key,
                        mayApproveResets: false, offlineSecret: sealedSecret, sealKey: sealKey)
                }
            } catch AccountError.tooManyDevices {
                refusal = APIError.tooManyDevices(maxDevices)
                return true
            }
            return enrolled != nil
        }
        if let refusal {
            audit.record(AuditEvent(kind: .deviceRefused, context: request.auditContext(context), detail: "enroll: \(maxDevices) devices already"))
            throw refusal
        }
        guard accepted, let enrolled, let user = try await store.user(id: enrolled.device.userID) else {
            context.logger.notice("enrollment refused: code not valid", metadata: ["ip": "\(context.clientIP)"])
            audit.record(AuditEvent(kind: .enrollmentRefused, context: request.auditContext(context), detail: "code not valid"))
            throw APIError.invalidEnrollmentCode
        }
        let device = enrolled.device
        let integrationName = try await store.integration(id: enrolled.integrationID)?.name ?? enrolled.integrationID
        context.logger.info("device enrolled", metadata: ["user": "\(user.id)", "device": "\(device.id)", "push": "\(device.pushEnabled)"])
        let auditContext = request.auditContext(context, deviceID: device.id)
        audit.record(
            AuditEvent(
                kind: .deviceEnrolled, userID: user.id, context: auditContext,
                detail: "integration \(integrationName)"
                    + (device.push.map { "; push \($0.described)" } ?? "; pull only")
                    + (device.publicKey.map { "; key \($0.thumbprint)" } ?? "")))
        await arrivals.announce(device, route: "enroll", integrationName: integrationName, context: auditContext, logger: context.logger)
        return MobileAuthController.LoginResponse(
            user: .init(id: user.id, email: user.email),
            device: .init(
                id: device.id, name: device.name, platform: device.platform, pushEnabled: device.pushEnabled, keyBound: device.publicKey != nil),
            apiKey: apiKey,
            offline: MobileAuthController.OfflineOut(secret, email: user.email),
            push: pushOffer)
    }
}

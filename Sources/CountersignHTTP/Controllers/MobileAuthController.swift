import CountersignCore
import CountersignWire
import HTTPTypes
import Hummingbird
import Logging

/// Login (registers a trusted device), API key refresh, the device's push
/// address and the push offer, the device itself, and sign-out.
struct MobileAuthController: Sendable {
    let accounts: any DeviceAccountStore
    let hasher: any PasswordHasher
    let authenticator: DeviceAuthenticator
    let abuse: RateLimitGuard
    let audit: AuditLog
    /// A hash of nothing anyone knows, verified for unknown emails so that they
    /// cost the same bcrypt time as a wrong password.
    let decoyHash: String
    let deviceKeys: DeviceKeyPolicy
    let arrivals: DeviceArrivals
    let offline: OfflineSecrets
    /// Which Web Push endpoints are accepted.
    let pushEndpoints: PushEndpointPolicy
    /// The providers this daemon pushes through and the VAPID key.
    let pushOffer: PushOffer

    func addRoutes(to group: RouterGroup<AppRequestContext>) {
        group.post("auth/login", use: login)
        group.post("auth/refresh-key", use: refreshKey)
        group.put("device/fcm-token", use: updateToken)
        group.put("device/push", use: updatePush)
        group.get("device", use: showDevice)
        group.get("push/config", use: pushConfig)
        group.delete("device", use: signOut)
    }

    struct LoginBody: Decodable {
        var email: String
        var password: String
        var deviceName: String
        var platform: String
        /// The older form of `push`: an FCM token.
        var fcmToken: String?
        /// Where its pushes go (any provider); wins over `fcmToken`.
        var push: PushAddressBody?
        /// A P-256 public key (JWK) the device's answers will be signed with.
        var publicKey: JWKMembers?
        /// The key its FCM and APNs pushes are sealed to (base64url P-256 point).
        var sealKey: String?
    }

    struct LoginResponse: ResponseEncodable {
        struct UserOut: Encodable {
            var id: String
            var email: String
        }
        struct DeviceOut: Encodable {
            var id: String
            var name: String
            var platform: String
            var pushEnabled: Bool
            /// Whether the device's answers must be signed with its key.
            var keyBound: Bool
        }
        var success = true
        var user: UserOut
        var device: DeviceOut
        var apiKey: String
        /// The device's offline-code secret, given once; absent with offline codes off.
        var offline: OfflineOut?
        /// The providers this daemon pushes through, and the VAPID key.
        var push: PushOffer
    }

    /// An offline-code secret as the app keeps it, and its `otpauth://` URI.
    struct OfflineOut: Encodable {
        var secret: String
        var uri: String

        init?(_ issued: OfflineSecrets.Issued?, email: String) {
            guard let issued else { return nil }
            secret = issued.secret
            uri = issued.uri(email: email)
        }
    }

    @Sendable func login(_ request: Request, context: AppRequestContext) async throws -> LoginResponse {
        let body = try await request.decodeJSON(as: LoginBody.self, context: context)
        let email = try Field.email(body.email)
        let password = try Field.password(body.password)
        let deviceName = try Field.name(body.deviceName, "deviceName", maxBytes: 100)
        let platform = try Field.name(body.platform, "platform", maxBytes: 32)
        let push = try Field.pushAddress(push: body.push, fcmToken: body.fcmToken, policy: pushEndpoints)
        // With device keys off, a key sent is ignored, not checked.
        let key = deviceKeys == .off ? nil : try body.publicKey.map { try Field.deviceKey($0, "publicKey") }
        let sealKey = try body.sealKey.map(Field.sealKey)
        let normalized = User.normalize(email: email)
        var user: User?
        let passwordMatches = try await abuse.attempt(
            against: [(.loginFailuresPerIP, context.clientKey), (.loginFailuresPerEmail, normalized)], RateLimitGuard.Message.logins,
            context: context, request: request, email: normalized
        ) {
            user = try await accounts.user(email: normalized)
            // An unknown email, or a user without a password, costs the same bcrypt work as a wrong password.
            guard let hash = user?.passwordHashIfAny else {
                _ = try await hasher.verify(password, hash: decoyHash)
                return false
            }
            return try await hasher.verify(password, hash: hash)
        }
        guard let user, passwordMatches else {
            context.logger.notice("login failed", metadata: ["ip": "\(context.clientIP)"])
            audit.record(
                AuditEvent(
                    kind: .loginFailed, userID: user?.id, email: normalized, context: request.auditContext(context),
                    detail: user == nil ? "unknown email" : "wrong password"))
            throw APIError.invalidCredentials
        }
        if let stored = user.passwordHashIfAny, hasher.needsRehash(stored) {
            // Made at another cost (the configuration changed since): made again at this one.
            do {
                try await accounts.rehashPassword(userID: user.id, from: stored, to: try await hasher.hash(password))
                context.logger.info("password rehashed at the configured cost", metadata: ["user": "\(user.id)"])
            } catch {
                context.logger.warning("password not rehashed", metadata: ["user": "\(user.id)", "error": "\(error)"])
            }
        }
        let apiKey = SecureToken.apiKey()
        let secret = try offline.issue()
        let registered: RegisteredDevice
        do {
            var registration = DeviceRegistration(
                userID: user.id, name: deviceName, platform: platform, push: push,
                apiKeyHash: SecureToken.sha256Hex(apiKey), publicKey: key, mayApproveResets: true, offlineSecret: secret?.sealed,
                sealKey: sealKey)
            // A device this login replaces is audited in the registration's transaction.
            registration.auditContext = request.auditContext(context)
            registered = try await accounts.registerDevice(registration, maxDevices: arrivals.maxPerUser)
        } catch AccountError.tooManyDevices {
            audit.record(
                AuditEvent(
                    kind: .deviceRefused, userID: user.id, context: request.auditContext(context),
                    detail: "login: \(arrivals.maxPerUser) devices already"))
            throw APIError.tooManyDevices(arrivals.maxPerUser)
        }
        let device = registered.device
        if let replaced = registered.replaced {
            // Its push address came with this login: it is signed out, and this is a new device.
            context.logger.notice("device replaced by a login with its push address", metadata: ["device": "\(replaced.id)", "by": "\(device.id)"])
        }
        context.logger.info("device signed in", metadata: ["user": "\(user.id)", "device": "\(device.id)", "push": "\(device.pushEnabled)"])
        audit.record(
            AuditEvent(
                kind: .loginSucceeded, userID: user.id, context: request.auditContext(context, deviceID: device.id),
                detail: (device.push.map { "push \($0.described)" } ?? "pull only")
                    + (device.publicKey.map { "; key \($0.thumbprint)" } ?? "") + (device.sealKey.map { "; seal key \($0.thumbprint)" } ?? "")))
        await arrivals.announce(
            device, route: "login", context: request.auditContext(context, deviceID: device.id), logger: context.logger)
        return LoginResponse(
            user: .init(id: user.id, email: user.email),
            device: .init(
                id: device.id, name: device.name, platform: device.platform, pushEnabled: device.pushEnabled,
                keyBound: device.publicKey != nil),
            apiKey: apiKey,
            offline: OfflineOut(secret, email: user.email),
            push: pushOffer
        )
    }

    struct RefreshBody: Decodable { var password: String }
    struct RefreshResponse: ResponseEncodable {
        var apiKey: String
        /// A new offline-code secret; the old one's codes stop working.
        var offline: OfflineOut?
    }

    @Sendable func refreshKey(_ request: Request, context: AppRequestContext) async throws -> RefreshResponse {
        let device = try await authenticator.device(for: request)
        let body = try await request.decodeJSON(as: RefreshBody.self, context: context)
        let password = try Field.password(body.password)
        guard let user = try await accounts.user(id: device.userID) else { throw APIError.unauthorized }
        let passwordMatches = try await abuse.attempt(
            against: [(.refreshKeyFailuresPerDevice, device.id)], RateLimitGuard.Message.refresh, context: context, request: request,
            userID: device.userID
        ) {
            guard let hash = user.passwordHashIfAny else {
                _ = try await hasher.verify(password, hash: decoyHash)
                return false
            }
            return try await hasher.verify(password, hash: hash)
        }
        guard passwordMatches else {
            context.logger.notice("key refresh refused: wrong password", metadata: ["device": "\(device.id)"])
            audit.record(AuditEvent(kind: .keyRefreshFailed, userID: user.id, context: request.auditContext(context, deviceID: device.id)))
            throw APIError.wrongPassword
        }
        let apiKey = SecureToken.apiKey()
        let secret = try offline.issue()
        try await accounts.replaceAPIKey(deviceID: device.id, apiKeyHash: SecureToken.sha256Hex(apiKey), offlineSecret: secret?.sealed)
        context.logger.info("API key refreshed", metadata: ["device": "\(device.id)"])
        audit.record(AuditEvent(kind: .keyRefreshed, userID: user.id, context: request.auditContext(context, deviceID: device.id)))
        return RefreshResponse(apiKey: apiKey, offline: OfflineOut(secret, email: user.email))
    }

    struct TokenBody: Decodable { var fcmToken: String }
    struct Success: ResponseEncodable { var success = true }

    /// `PUT /api/mobile/device/fcm-token`: the older form of `device/push`, for FCM.
    @Sendable func updateToken(_ request: Request, context: AppRequestContext) async throws -> Success {
        let device = try await authenticator.device(for: request)
        let body = try await request.decodeJSON(as: TokenBody.self, context: context)
        let token = Device.pushToken(from: try Field.text(body.fcmToken, "fcmToken", maxBytes: PushAddress.maximumTokenBytes, allowEmpty: true))
        return try await update(device, to: token.map(PushAddress.fcm), request: request, context: context)
    }

    /// `PUT /api/mobile/device/push`: a new push address, of any provider.
    @Sendable func updatePush(_ request: Request, context: AppRequestContext) async throws -> Success {
        let device = try await authenticator.device(for: request)
        let body = try await request.decodeJSON(as: PushUpdateBody.self, context: context)
        let push = try Field.pushAddress(body.address, policy: pushEndpoints)
        // Both checked before either is written.
        let sealKey = try body.sealKey.map { try $0.map(Field.sealKey) }
        if let sealKey { try await accounts.setSealKey(deviceID: device.id, key: sealKey) }
        return try await update(device, to: push, sealKey: sealKey, request: request, context: context)
    }

    /// Sets the push address, and audits it with the sealing key's change when there was one (one row).
    private func update(
        _ device: Device, to push: PushAddress?, sealKey: SealKey?? = nil, request: Request, context: AppRequestContext
    ) async throws -> Success {
        try await accounts.updatePushAddress(deviceID: device.id, push: push)
        context.logger.info("push address updated", metadata: ["device": "\(device.id)", "push": "\(push?.described ?? "none")"])
        let sealed = sealKey.map { key in key.map { "; seal key \($0.thumbprint)" } ?? "; seal key removed" } ?? ""
        audit.record(
            AuditEvent(
                kind: .pushTokenUpdated, userID: device.userID, context: request.auditContext(context, deviceID: device.id),
                detail: (push.map { "push \($0.described)" } ?? "pull only") + sealed))
        return Success()
    }

    struct DeviceResponse: ResponseEncodable {
        struct PushOut: Encodable {
            var provider: PushProvider
            /// The token's or endpoint's last 6 characters.
            var token: String
            var enabled: Bool
        }
        var id: String
        var name: String
        var platform: String
        var keyBound: Bool
        var mayApproveResets: Bool
        @NullWhenAbsent var push: PushOut?
        /// The RFC 7638 thumbprint of the key its pushes are sealed to.
        @NullWhenAbsent var sealKey: String?
    }

    /// `GET /api/mobile/device`: the device as the daemon holds it; of its push address, only the provider and the last characters.
    @Sendable func showDevice(_ request: Request, context: AppRequestContext) async throws -> DeviceResponse {
        let device = try await authenticator.device(for: request)
        return DeviceResponse(
            id: device.id, name: device.name, platform: device.platform, keyBound: device.publicKey != nil,
            mayApproveResets: device.mayApproveResets,
            push: device.push.map { .init(provider: $0.provider, token: String($0.token.suffix(6)), enabled: device.pushEnabled) },
            sealKey: device.sealKey?.thumbprint)
    }

    /// `GET /api/mobile/push/config`: what the app subscribes its push with.
    @Sendable func pushConfig(_ request: Request, context: AppRequestContext) async throws -> PushOfferResponse {
        _ = try await authenticator.device(for: request)
        return PushOfferResponse(offer: pushOffer)
    }

    @Sendable func signOut(_ request: Request, context: AppRequestContext) async throws -> Success {
        let device = try await authenticator.device(for: request)
        _ = try await accounts.deleteDevice(id: device.id)
        context.logger.info("device signed out", metadata: ["device": "\(device.id)"])
        audit.record(AuditEvent(kind: .deviceSignedOut, userID: device.userID, context: request.auditContext(context, deviceID: device.id)))
        return Success()
    }
}

/// ``PushOffer`` as an answer of its own.
struct PushOfferResponse: ResponseEncodable {
    var offer: PushOffer

    func encode(to encoder: any Encoder) throws {
        try offer.encode(to: encoder)
    }
}

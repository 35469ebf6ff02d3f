import CountersignCore
import Foundation
import HTTPTypes
import Hummingbird
import Logging

/// An integration's users and their devices: create a user, issue a one-time
/// enrollment code, list and remove devices. Integrations are trusted
/// backends, but each reaches only the users it created or was granted: any
/// other user, existing or not, is the same 404 `user_not_found`.
struct IntegrationUsersController: Sendable {
    let store: any IntegrationStore & UserAdministration & RemovalStore
    /// Told of the live requests an erasure cancelled: it wakes their long polls.
    let broker: ApprovalBroker
    let authenticator: IntegrationAuthenticator
    let keys: SecretKeys
    let audit: AuditLog
    let abuse: RateLimitGuard
    /// Where devices reach the daemon, for the enrollment URI (`--public-url`,
    /// else the listen address): never the request's `Host`.
    let publicURL: String
    /// The phone app's scheme of enrollment links (`--app-link-scheme`).
    var linkScheme = AppIdentity().linkScheme

    func addRoutes(to group: RouterGroup<AppRequestContext>) {
        group.post("users", use: createUser)
        group.post("users/{email}/enrollments", use: enroll)
        group.get("users/{email}/devices", use: devices)
        group.delete("users/{email}/devices/{deviceId}", use: removeDevice)
        group.delete("users/{email}", use: eraseUser)
    }

    struct CreateBody: Decodable { var email: String }
    struct UserResponse: Encodable {
        var userId: String
        var email: String
    }

    @Sendable func createUser(_ request: Request, context: AppRequestContext) async throws -> Response {
        let integration = try await authenticator.integration(for: request)
        let body = try await request.decodeJSON(as: CreateBody.self, context: context)
        let email = User.normalize(email: try Field.email(body.email))
        // Each create may tell that an email is taken, as every sign-up does: bounded per integration.
        try await abuse.hit(
            .userCreatesPerIntegration, integration.id, "Too many users created by this integration. Please slow down.", context: context,
            request: request)
        // An existing user stays whose it was; one the integration does not reach is not given to it.
        let (user, created) = try await store.ensureUser(email: email, integrationID: integration.id)
        if !created, try await store.user(email: email, reachableBy: integration.id) == nil {
            context.logger.notice("user create refused: the email is another's", metadata: ["integration": "\(integration.name)"])
            audit.record(
                AuditEvent(
                    kind: .emailUnavailable, userID: user.id, context: request.auditContext(context), detail: "integration \(integration.name)"))
            throw APIError.emailUnavailable
        }
        if created {
            context.logger.info("user created by an integration", metadata: ["user": "\(user.id)", "integration": "\(integration.name)"])
            audit.record(
                AuditEvent(
                    kind: .userCreated, userID: user.id, email: user.email, context: request.auditContext(context),
                    detail: "integration \(integration.name)"))
        }
        return try JSONResponse.response(UserResponse(userId: user.id, email: user.email), status: created ? .created : .ok)
    }

    struct EnrollmentResponse: Encodable {
        var enrollmentCode: String
        var enrollmentURI: String
        var expiresAt: String
    }

    @Sendable func enroll(_ request: Request, context: AppRequestContext) async throws -> Response {
        let integration = try await authenticator.integration(for: request)
        _ = try await request.readBody(context: context)
        let user = try await user(context, integration: integration)
        try await abuse.hit(
            .enrollmentsPerIntegration, integration.id, "Too many enrollment codes issued by this integration. Please try again later.",
            context: context, request: request, userID: user.id)
        let code = EnrollmentCode.generate()
        let now = Date()
        let expiresAt = now.addingTimeInterval(EnrollmentCode.ttl)
        // Only under the key this request came with: a code cannot outlive a rotation that raced it.
        guard
            try await store.createEnrollment(
                codeHash: EnrollmentCode.hash(code, keys: keys), userID: user.id, integrationID: integration.id,
                apiKeyHash: authenticator.keyHash(of: request), createdAt: now, expiresAt: expiresAt)
        else { throw APIError.integrationUnauthorized }
        context.logger.info("enrollment code issued", metadata: ["user": "\(user.id)", "integration": "\(integration.name)"])
        audit.record(
            AuditEvent(
                kind: .enrollmentIssued, userID: user.id, context: request.auditContext(context), detail: "integration \(integration.name)"))
        let answer = EnrollmentResponse(
            enrollmentCode: code, enrollmentURI: Self.enrollmentURI(base: base, code: code, scheme: linkScheme),
            expiresAt: Timestamp.string(expiresAt))
        return try JSONResponse.response(answer, status: .created)
    }

    /// `countersign://enroll?url=…&code=…` (the app's scheme), each value percent-encoded.
    static func enrollmentURI(base: String, code: String, scheme: String = AppIdentity().linkScheme) -> String {
        var components = URLComponents()
        components.scheme = scheme
        components.host = "enroll"
        components.queryItems = [URLQueryItem(name: "url", value: base), URLQueryItem(name: "code", value: code)]
        // URLComponents leaves ":" and "/" as they are in a query; a strict reader wants them encoded.
        components.percentEncodedQuery = components.percentEncodedQuery?
            .replacingOccurrences(of: ":", with: "%3A").replacingOccurrences(of: "/", with: "%2F")
        return components.string ?? "\(scheme)://enroll?code=\(code)"
    }

    private var base: String { publicURL.hasSuffix("/") ? String(publicURL.dropLast()) : publicURL }

    struct DevicesResponse: ResponseEncodable {
        struct Item: Encodable {
            var id: String
            var name: String
            var platform: String
            var pushEnabled: Bool
            var keyBound: Bool
            var createdAt: String
            /// `null` for a device never seen since it enrolled.
            @NullWhenAbsent var lastSeenAt: String?
        }
        var devices: [Item]
    }

    @Sendable func devices(_ request: Request, context: AppRequestContext) async throws -> DevicesResponse {
        let integration = try await authenticator.integration(for: request)
        let user = try await user(context, integration: integration)
        let devices = try await store.devices(userID: user.id)
        return DevicesResponse(
            devices: devices.map {
                .init(
                    id: $0.id, name: $0.name, platform: $0.platform, pushEnabled: $0.pushEnabled, keyBound: $0.publicKey != nil,
                    createdAt: Timestamp.string($0.createdAt), lastSeenAt: $0.lastSeenAt.map(Timestamp.string))
            })
    }

    struct Removed: ResponseEncodable { var success = true }

    @Sendable func removeDevice(_ request: Request, context: AppRequestContext) async throws -> Removed {
        let integration = try await authenticator.integration(for: request)
        // Removing is for the integration's own users: a grant lets it enroll and list only.
        let user = try await user(context, integration: integration, owned: true)
        let deviceID = try context.parameters.require("deviceId")
        guard SecureToken.isWellFormed(deviceID), let device = try await store.device(id: deviceID), device.userID == user.id,
            try await store.deleteDevice(id: device.id)
        else {
            throw APIError.deviceNotFound
        }
        context.logger.info("device removed by an integration", metadata: ["device": "\(device.id)", "integration": "\(integration.name)"])
        audit.record(
            AuditEvent(
                kind: .deviceRemoved, userID: user.id, context: request.auditContext(context, deviceID: device.id),
                detail: "integration \(integration.name)"))
        return Removed()
    }

    struct ErasedResponse: ResponseEncodable {
        var success = true
        var devicesRemoved: Int
        var approvalsCancelled: Int
    }

    /// Erases one of the integration's own users (a grant is not enough) and what is theirs, in one
    /// transaction: live requests cancelled (their webhook events sent, long polls woken), devices,
    /// keys, codes, grants and resets deleted; the audit trail keeps its events under a keyed pseudonym.
    @Sendable func eraseUser(_ request: Request, context: AppRequestContext) async throws -> ErasedResponse {
        let integration = try await authenticator.integration(for: request)
        _ = try await request.readBody(context: context)
        let user = try await user(context, integration: integration, owned: true)
        try await abuse.hit(
            .erasuresPerIntegration, integration.id, "Too many users erased by this integration. Please slow down.", context: context,
            request: request, userID: user.id)
        let pseudonym = keys.auditPseudonym(email: user.email)
        let now = Date()
        let event = AuditEvent(
            at: now, kind: .userErased, userID: user.id, email: pseudonym, context: request.auditContext(context),
            detail: "integration \(integration.name), over the API")
        // Still its own in the erasing transaction: a password set meanwhile has ended the ownership.
        guard let erased = try await store.eraseUser(userID: user.id, ownedBy: integration.id, pseudonym: pseudonym, at: now, audit: event) else {
            throw APIError.userNotFound
        }
        await broker.removed(erased.cancelled, at: now, logger: context.logger)
        context.logger.notice(
            "user erased by an integration",
            metadata: ["user": "\(user.id)", "integration": "\(integration.name)", "cancelled": "\(erased.cancelled.count)"])
        return ErasedResponse(devicesRemoved: erased.devices, approvalsCancelled: erased.cancelled.count)
    }

    /// The user named by the `{email}` path parameter (percent-encoded or not),
    /// if the integration reaches it; else 404 whether or not it exists.
    private func user(_ context: AppRequestContext, integration: Integration, owned: Bool = false) async throws -> User {
        let raw = try context.parameters.require("email")
        let email = try Field.email(raw.removingPercentEncoding ?? raw)
        let found =
            owned ? try await store.user(email: email, ownedBy: integration.id) : try await store.user(email: email, reachableBy: integration.id)
        guard let user = found else { throw APIError.userNotFound }
        return user
    }
}

/// A JSON answer with a status other than 200.
enum JSONResponse {
    static func response(_ value: some Encodable, status: HTTPResponse.Status) throws -> Response {
        try response(json: APIJSON.encoder.encode(value), status: status)
    }

    static func response(json: Data, status: HTTPResponse.Status) throws -> Response {
        Response(
            status: status, headers: [.contentType: "application/json; charset=utf-8"], body: .init(byteBuffer: ByteBuffer(bytes: json)))
    }
}

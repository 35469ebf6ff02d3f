import CountersignCore
import CountersignDeviceKeys
import Foundation
import Hummingbird
import Logging

/// `PUT /device/public-key`: a device sets or replaces the key its answers
/// are signed with, proving it holds the new key (and, to replace one, the old).
struct DeviceKeyController: Sendable {
    let accounts: any DeviceAccountStore
    let authenticator: DeviceAuthenticator
    let audit: AuditLog
    let deviceKeys: DeviceKeyPolicy
    let abuse: RateLimitGuard

    func addRoutes(to group: RouterGroup<AppRequestContext>) {
        group.put("device/public-key", use: setKey)
    }

    struct Body: Decodable {
        var publicKey: JWKMembers
        var proof: String
        var previousProof: String?
    }

    struct KeyResponse: ResponseEncodable {
        var success = true
        var keyBound = true
    }

    @Sendable func setKey(_ request: Request, context: AppRequestContext) async throws -> KeyResponse {
        let device = try await authenticator.device(for: request)
        guard deviceKeys != .off else { throw APIError.invalidRequest("Device keys are turned off on this server.") }
        try await abuse.hit(
            .deviceKeyChangesPerDevice, device.id, "Too many key changes from this device. Please try again later.", context: context,
            request: request, userID: device.userID)
        let body = try await request.decodeJSON(as: Body.self, context: context)
        let key = try Field.deviceKey(body.publicKey, "publicKey")
        let proof = body.proof
        let auditContext = request.auditContext(context, deviceID: device.id)
        let now = Date()
        var uses: [ProofUse] = []
        if let current = device.publicKey, current != key {
            guard let previous = body.previousProof else {
                throw APIError.invalidRequest(
                    "The field `previousProof` is required to replace this device's key: a proof made with the current key.")
            }
            guard let use = await PossessionProof.verifiedUse(previous, key: current, deviceID: device.id, now: now) else {
                throw refuse("previous key's proof not valid", device: device, context: auditContext, logger: context.logger)
            }
            uses.append(use)
        }
        guard let use = await PossessionProof.verifiedUse(proof, key: key, deviceID: device.id, now: now) else {
            throw refuse("new key's proof not valid", device: device, context: auditContext, logger: context.logger)
        }
        uses.append(use)
        // Used once by meaning, in the database: another node, or this one after a restart, refuses it too.
        guard try await accounts.useProofs(uses, until: now.addingTimeInterval(2 * PossessionProof.maxSkew), now: now) else {
            throw refuse("a proof used before", device: device, context: auditContext, logger: context.logger)
        }
        guard try await accounts.setDeviceKey(deviceID: device.id, key: key, replacing: device.publicKey) else {
            throw APIError(.conflict, "conflict", "This device's key changed meanwhile. Read it again, then retry.")
        }
        let replaced = device.publicKey.map { $0 == key ? " (unchanged)" : " (replaces \($0.thumbprint))" } ?? ""
        context.logger.info("device key set", metadata: ["device": "\(device.id)", "key": "\(key.thumbprint)"])
        audit.record(AuditEvent(kind: .deviceKeySet, userID: device.userID, context: auditContext, detail: "key \(key.thumbprint)\(replaced)"))
        return KeyResponse()
    }

    private func refuse(_ reason: String, device: Device, context: AuditContext, logger: Logger) -> APIError {
        logger.notice("device key refused", metadata: ["device": "\(device.id)", "reason": "\(reason)"])
        audit.record(AuditEvent(kind: .signatureRefused, userID: device.userID, context: context, detail: "key change: \(reason)"))
        return .invalidSignature
    }
}

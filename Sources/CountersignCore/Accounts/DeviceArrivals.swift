import Foundation
import Logging

/// A device joined a user (login, enrollment): each of the user's other
/// push-enabled devices is told, and the audit trail records it, so that a
/// device nobody expected is noticed on the phone the user holds.
public struct DeviceArrivals: Sendable {
    let accounts: any PushTargetStore
    let pushQueue: PushQueue
    let audit: AuditLog
    /// The most devices a user may have.
    public let maxPerUser: Int

    public init(accounts: any PushTargetStore, pushQueue: PushQueue, audit: AuditLog, maxPerUser: Int) {
        self.accounts = accounts
        self.pushQueue = pushQueue
        self.audit = audit
        self.maxPerUser = maxPerUser
    }

    /// Announces `device` if the user has another device; `route` is `login` or `enroll`.
    public func announce(_ device: Device, route: String, integrationName: String? = nil, context: AuditContext, logger: Logger) async {
        let others: [Device]
        do {
            others = try await accounts.devices(userID: device.userID).filter { $0.id != device.id }
        } catch {
            logger.error("cannot read devices to announce a new one", metadata: ["error": "\(error)"])
            return
        }
        guard !others.isEmpty else { return }
        let now = Date()
        audit.record(
            AuditEvent(
                at: now, kind: .deviceAdded, userID: device.userID, context: context,
                detail: "route \(route)" + (integrationName.map { "; integration \($0)" } ?? "") + "; \(others.count) other device(s)"))
        if pushQueue.enqueue(
            .deviceAdded(userID: device.userID, deviceID: device.id, deviceName: device.name, platform: device.platform, at: now)) != nil
        {
            logger.warning("push queue full: dropped the oldest notice")
        }
    }
}

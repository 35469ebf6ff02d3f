import CountersignCore
import CountersignWire
import Foundation

extension User {
    @inlinable public init(row: some SQLRow) throws {
        self.init(
            id: try row.get("id"), email: try row.get("email"), passwordHash: try row.get("password_hash"), createdAt: try row.get("created_at"),
            silencedUntil: try row.get("silenced_until"), ownerIntegrationID: try row.get("owner_integration_id"))
    }
}

extension Device {
    @inlinable public init(row: some SQLRow) throws {
        self.init(
            id: try row.get("id"),
            userID: try row.get("user_id"),
            name: try row.get("name"),
            platform: try row.get("platform"),
            push: PushAddress(storedProvider: try row.get("push_provider"), token: try row.get("fcm_token"), options: try row.get("push_options")),
            pushEnabled: try row.get("push_enabled"),
            createdAt: try row.get("created_at"),
            publicKey: try (try row.get("public_key", as: String?.self)).map { stored throws(DeviceKey.Invalid) in try DeviceKey(stored: stored) },
            lastSeenAt: try row.get("last_seen_at"),
            mayApproveResets: try row.get("may_approve_resets"),
            offlineSecret: try row.get("offline_secret"),
            sealKey: try (try row.get("seal_key", as: String?.self)).map { stored throws(SealKey.Invalid) in try SealKey(base64URL: stored) }
        )
    }
}

import CountersignCore
import Foundation
import GRDB

extension SQLiteStore: AccountStore {
    public func createUser(email: String, passwordHash: String) async throws -> User {
        let user = User(id: SecureToken.recordID(), email: User.normalize(email: email), passwordHash: passwordHash, createdAt: Date())
        return try await pool.write { db in
            if try Bool.fetchOne(db.cachedStatement(sql: "SELECT 1 FROM users WHERE email = ?"), arguments: [user.email]) != nil {
                throw AccountError.emailTaken
            }
            try db.cachedStatement(sql: "INSERT INTO users (id, email, password_hash, created_at) VALUES (?, ?, ?, ?)").execute(arguments: [
                user.id, user.email, user.passwordHash, user.createdAt.storedValue,
            ]
            )
            return user
        }
    }

    public func user(email: String) async throws -> User? {
        try readNow { db in
            try Row.fetchOne(db.cachedStatement(sql: "SELECT * FROM users WHERE email = ?"), arguments: [User.normalize(email: email)])
                .map(User.init(row:))
        }
    }

    public func user(id: String) async throws -> User? {
        try await pool.read { db in
            try Row.fetchOne(db.cachedStatement(sql: "SELECT * FROM users WHERE id = ?"), arguments: [id]).map(User.init(row:))
        }
    }

    public func users() async throws -> [User] {
        try await pool.read { db in
            try Row.fetchAll(db.cachedStatement(sql: "SELECT * FROM users ORDER BY email")).map(User.init(row:))
        }
    }

    public func rehashPassword(userID: String, from old: String, to new: String) async throws {
        try await pool.write { db in
            try db.cachedStatement(sql: "UPDATE users SET password_hash = ? WHERE id = ? AND password_hash = ?").execute(arguments: [
                new, userID, old,
            ])
        }
    }

    public func costliestPasswordHashCost() async throws -> Int? {
        // `$2b$12$…`: the cost is the two digits after the second `$`.
        try await pool.read { db in
            try String.fetchAll(db.cachedStatement(sql: "SELECT DISTINCT substr(password_hash, 1, 7) FROM users WHERE password_hash LIKE '$2%'"))
                .compactMap { Int($0.split(separator: "$").dropFirst().first ?? "") }.max()
        }
    }

    public func setPassword(userID: String, passwordHash: String) async throws {
        try await pool.write { db in
            try db.cachedStatement(sql: "UPDATE users SET password_hash = ? WHERE id = ?").execute(arguments: [passwordHash, userID])
            if db.changesCount == 0 { throw AccountError.unknownUser }
            _ = try Self.cancelLivePhoneResets(userID: userID, now: Date(), by: "the operator (user passwd)", db)
        }
    }

    public func registerDevice(_ registration: DeviceRegistration, maxDevices: Int) async throws -> Device {
        try await pool.write { db in try Self.registerDevice(registration, maxDevices: maxDevices, db) }
    }

    /// Registers a device inside the caller's transaction (login, enrollment).
    static func registerDevice(_ registration: DeviceRegistration, maxDevices: Int, _ db: Database) throws -> Device {
        let userID = registration.userID
        // A token another account's device holds stays with it: whoever presents it
        // must not silence that device's prompts, nor have their own prompts shown there.
        var push = try Self.addressUnlessClaimed(registration.push, byOtherThan: userID, db)
        // An enrollment never takes a device over (its key, its right to answer
        // resets): with a token one of the user's devices holds, it is pull only.
        if !registration.mayApproveResets, let token = push?.token,
            try Bool.fetchOne(db.cachedStatement(sql: "SELECT 1 FROM devices WHERE user_id = ? AND fcm_token = ?"), arguments: [userID, token])
                ?? false
        {
            push = nil
        }
        if let push {
            // The same phone again for this user: replace that device, keeping its id.
            if let existing = try Row.fetchOne(
                db.cachedStatement(sql: "SELECT * FROM devices WHERE user_id = ? AND fcm_token = ?"),
                arguments: [userID, push.token]
            ) {
                var device = try Device(row: existing)
                device.name = registration.name
                device.platform = registration.platform
                device.push = push
                device.pushEnabled = true
                device.publicKey = registration.publicKey
                device.mayApproveResets = registration.mayApproveResets
                device.offlineSecret = registration.offlineSecret
                // A new offline secret starts with no step used.
                try db.cachedStatement(
                    sql: """
                        UPDATE devices SET name = ?, platform = ?, push_provider = ?, push_options = ?, push_enabled = 1, api_key_hash = ?,
                            public_key = ?, may_approve_resets = ?, offline_secret = ?, offline_step = NULL
                        WHERE id = ?
                        """
                ).execute(arguments: [
                    registration.name, registration.platform, PushAddress.storedProvider(of: push), push.storedOptions, registration.apiKeyHash,
                    registration.publicKey?.json,
                    registration.mayApproveResets, registration.offlineSecret, device.id,
                ])
                return device
            }
        }
        let count = try Int.fetchOne(db.cachedStatement(sql: "SELECT count(*) FROM devices WHERE user_id = ?"), arguments: [userID]) ?? 0
        guard count < maxDevices else { throw AccountError.tooManyDevices }
        let device = Device(
            id: SecureToken.recordID(), userID: userID, name: registration.name, platform: registration.platform, push: push,
            pushEnabled: push != nil, createdAt: Date(), publicKey: registration.publicKey, mayApproveResets: registration.mayApproveResets,
            offlineSecret: registration.offlineSecret)
        try db.cachedStatement(
            sql: """
                INSERT INTO devices (
                    id, user_id, name, platform, fcm_token, push_provider, push_options, push_enabled, api_key_hash, created_at, public_key,
                    may_approve_resets, offline_secret)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """
        ).execute(arguments: [
            device.id, userID, device.name, device.platform, push?.token, PushAddress.storedProvider(of: push), push?.storedOptions,
            device.pushEnabled, registration.apiKeyHash,
            device.createdAt.storedValue, registration.publicKey?.json, device.mayApproveResets, registration.offlineSecret,
        ])
        return device
    }

    public func device(apiKeyHash: String) async throws -> Device? {
        let device = try readNow { db in
            try Row.fetchOne(db.cachedStatement(sql: "SELECT * FROM devices WHERE api_key_hash = ?"), arguments: [apiKeyHash])
                .map(Device.init(row:))
        }
        // Seen now: written at most once a minute, so that most requests stay reads.
        let now = Date()
        if let device, (device.lastSeenAt.map { now.timeIntervalSince($0) } ?? .infinity) >= Device.lastSeenResolution {
            try await pool.write { db in
                try db.cachedStatement(sql: "UPDATE devices SET last_seen_at = ? WHERE id = ?").execute(arguments: [now.storedValue, device.id])
            }
        }
        return device
    }

    public func devices(userID: String) async throws -> [Device] {
        try readNow { db in
            try Row.fetchAll(db.cachedStatement(sql: "SELECT * FROM devices WHERE user_id = ? ORDER BY created_at"), arguments: [userID])
                .map(Device.init(row:))
        }
    }

    public func setDeviceKey(deviceID: String, key: DeviceKey, replacing current: DeviceKey?) async throws -> Bool {
        try await pool.write { db in
            try db.cachedStatement(sql: "UPDATE devices SET public_key = ? WHERE id = ? AND public_key IS ?").execute(arguments: [
                key.json, deviceID, current?.json,
            ])
            return db.changesCount == 1
        }
    }

    public func replaceAPIKey(deviceID: String, apiKeyHash: String, offlineSecret: Data?) async throws {
        try await pool.write { db in
            try db.cachedStatement(
                sql: "UPDATE devices SET api_key_hash = ?, may_approve_resets = 1, offline_secret = ?, offline_step = NULL WHERE id = ?"
            ).execute(arguments: [apiKeyHash, offlineSecret, deviceID])
        }
    }

    public func useProofs(_ uses: [ProofUse], until: Date, now: Date) async throws -> Bool {
        struct Reused: Error {}
        do {
            try await pool.write { db in
                try db.cachedStatement(sql: "DELETE FROM used_proofs WHERE expires_at <= ?").execute(arguments: [now.storedValue])
                for use in uses {
                    try db.cachedStatement(
                        sql: "INSERT OR IGNORE INTO used_proofs (device_id, thumbprint, issued_at, expires_at) VALUES (?, ?, ?, ?)"
                    ).execute(arguments: [use.deviceID, use.thumbprint, use.issuedAt, until.storedValue])
                    // Thrown, so that none of them is recorded.
                    if db.changesCount != 1 { throw Reused() }
                }
            }
            return true
        } catch is Reused {
            return false
        }
    }

    public func updatePushAddress(deviceID: String, push: PushAddress?) async throws {
        try await pool.write { db in
            guard let userID = try String.fetchOne(db.cachedStatement(sql: "SELECT user_id FROM devices WHERE id = ?"), arguments: [deviceID]) else {
                return
            }
            let push = try Self.addressUnlessClaimed(push, byOtherThan: userID, db)
            if let push {
                // The phone moved to this device of the same user: the old one stops getting its prompts.
                try db.cachedStatement(sql: "UPDATE devices SET fcm_token = NULL, push_enabled = 0 WHERE fcm_token = ? AND user_id = ? AND id != ?")
                    .execute(arguments: [push.token, userID, deviceID]
                    )
            }
            try db.cachedStatement(sql: "UPDATE devices SET fcm_token = ?, push_provider = ?, push_options = ?, push_enabled = ? WHERE id = ?")
                .execute(arguments: [
                    push?.token, PushAddress.storedProvider(of: push), push?.storedOptions, push != nil, deviceID,
                ])
        }
    }

    /// `push`, unless a device of another user holds its token or endpoint: then `nil` (pull only).
    static func addressUnlessClaimed(_ push: PushAddress?, byOtherThan userID: String, _ db: Database) throws -> PushAddress? {
        guard let push else { return nil }
        let claimed =
            try Bool.fetchOne(
                db.cachedStatement(sql: "SELECT 1 FROM devices WHERE fcm_token = ? AND user_id != ? LIMIT 1"), arguments: [push.token, userID])
            ?? false
        return claimed ? nil : push
    }

    public func disablePush(deviceID: String, token: String) async throws {
        try await pool.write { db in
            try db.cachedStatement(sql: "UPDATE devices SET push_enabled = 0 WHERE id = ? AND fcm_token = ?").execute(arguments: [deviceID, token]
            )
        }
    }

    public func silencePrompts(userID: String, until: Date?) async throws {
        try await pool.write { db in
            try db.cachedStatement(sql: "UPDATE users SET silenced_until = ? WHERE id = ?").execute(arguments: [until?.storedValue, userID])
            if db.changesCount == 0 { throw AccountError.unknownUser }
        }
    }

    public func deleteDevice(id: String) async throws -> Bool {
        try await pool.write { db in
            try db.cachedStatement(sql: "DELETE FROM devices WHERE id = ?").execute(arguments: [id])
            return db.changesCount == 1
        }
    }
}

extension User {
    init(row: Row) throws {
        self.init(
            id: row["id"],
            email: row["email"],
            passwordHash: row["password_hash"],
            createdAt: Date(stored: row["created_at"]),
            silencedUntil: (row["silenced_until"] as Double?).map(Date.init(stored:))
        )
    }
}

extension Device {
    init(row: Row) throws {
        self.init(
            id: row["id"],
            userID: row["user_id"],
            name: row["name"],
            platform: row["platform"],
            push: PushAddress(storedProvider: row["push_provider"], token: row["fcm_token"], options: row["push_options"]),
            pushEnabled: row["push_enabled"],
            createdAt: Date(stored: row["created_at"]),
            publicKey: try (row["public_key"] as String?).map { stored throws(DeviceKey.Invalid) in try DeviceKey(stored: stored) },
            lastSeenAt: (row["last_seen_at"] as Double?).map(Date.init(stored:)),
            mayApproveResets: row["may_approve_resets"],
            offlineSecret: row["offline_secret"]
        )
    }
}

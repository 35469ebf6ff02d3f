import CountersignCore
import Foundation
import PostgresNIO

extension PostgresStore: AccountStore {
    public func createUser(email: String, passwordHash: String) async throws -> User {
        let user = User(id: SecureToken.recordID(), email: User.normalize(email: email), passwordHash: passwordHash, createdAt: Date())
        let inserted = try await transaction { connection in
            try await connection.run(
                """
                INSERT INTO users (id, email, password_hash, created_at) VALUES (\(user.id), \(user.email), \(user.passwordHash), \(user.createdAt.stored))
                ON CONFLICT (email) DO NOTHING RETURNING id
                """, self.logger)
        }
        guard inserted == 1 else { throw AccountError.emailTaken }
        return user
    }

    public func user(email: String) async throws -> User? {
        try await rows("SELECT * FROM users WHERE email = \(User.normalize(email: email))").first.map(User.init(row:))
    }

    public func user(id: String) async throws -> User? {
        try await rows("SELECT * FROM users WHERE id = \(id)").first.map(User.init(row:))
    }

    public func users() async throws -> [User] {
        try await rows("SELECT * FROM users ORDER BY email").map(User.init(row:))
    }

    public func rehashPassword(userID: String, from old: String, to new: String) async throws {
        try await rows("UPDATE users SET password_hash = \(new) WHERE id = \(userID) AND password_hash = \(old) RETURNING id")
    }

    public func costliestPasswordHashCost() async throws -> Int? {
        // `$2b$12$…`: the cost is the two digits after the second `$`.
        try await rows("SELECT DISTINCT substr(password_hash, 1, 7) AS prefix FROM users WHERE password_hash LIKE '$2%'")
            .compactMap { Int((try $0.get("prefix", as: String.self)).split(separator: "$").dropFirst().first ?? "") }.max()
    }

    public func setPassword(userID: String, passwordHash: String) async throws {
        let changed = try await transaction { connection in
            // Live phone resets first, then the user: the order a completion takes its locks in.
            try await connection.run(
                "SELECT id FROM approval_requests WHERE user_id = \(userID) AND state IN ('pending', 'approved') FOR UPDATE", self.logger)
            let changed = try await connection.run(
                "UPDATE users SET password_hash = \(passwordHash) WHERE id = \(userID) RETURNING id", self.logger)
            if changed == 1 {
                _ = try await Self.cancelLivePhoneResets(userID: userID, now: Date(), by: "the operator (user passwd)", connection, self.logger)
            }
            return changed
        }
        if changed == 0 { throw AccountError.unknownUser }
    }

    public func registerDevice(_ registration: DeviceRegistration, maxDevices: Int) async throws -> Device {
        try await transaction { connection in try await Self.registerDevice(registration, maxDevices: maxDevices, connection, self.logger) }
    }

    /// Registers a device inside the caller's transaction (login, enrollment).
    static func registerDevice(
        _ registration: DeviceRegistration, maxDevices: Int, _ connection: PostgresConnection, _ logger: Logger
    ) async throws -> Device {
        let userID = registration.userID
        // The user's row is locked first: two registrations at once count each other's device.
        try await connection.run("SELECT id FROM users WHERE id = \(userID) FOR UPDATE", logger)
        // A token another account's device holds stays with it (see the SQLite store).
        var push = try await Self.addressUnlessClaimed(registration.push, byOtherThan: userID, connection, logger)
        // An enrollment never takes a device over (see the SQLite store): with a held token it is pull only.
        if !registration.mayApproveResets, let token = push?.token,
            try await connection.run("SELECT 1 FROM devices WHERE user_id = \(userID) AND fcm_token = \(token)", logger) > 0
        {
            push = nil
        }
        if let push,
            let existing = try await connection.rows(
                "SELECT * FROM devices WHERE user_id = \(userID) AND fcm_token = \(push.token) FOR UPDATE", logger
            ).first
        {
            // The same phone again for this user: replace that device, keeping its id.
            var device = try Device(row: existing)
            device.name = registration.name
            device.platform = registration.platform
            device.push = push
            device.pushEnabled = true
            device.publicKey = registration.publicKey
            device.mayApproveResets = registration.mayApproveResets
            device.offlineSecret = registration.offlineSecret
            try await connection.run(
                """
                UPDATE devices SET name = \(registration.name), platform = \(registration.platform), push_provider = \(PushAddress.storedProvider(of: push)),
                    push_options = \(push.storedOptions), push_enabled = true,
                    api_key_hash = \(registration.apiKeyHash), public_key = \(registration.publicKey?.json),
                    may_approve_resets = \(registration.mayApproveResets), offline_secret = \(registration.offlineSecret), offline_step = NULL
                WHERE id = \(device.id) RETURNING id
                """, logger)
            return device
        }
        let count =
            try await connection.rows("SELECT count(*) AS n FROM devices WHERE user_id = \(userID)", logger).first?.get("n", as: Int.self) ?? 0
        guard count < maxDevices else { throw AccountError.tooManyDevices }
        let device = Device(
            id: SecureToken.recordID(), userID: userID, name: registration.name, platform: registration.platform, push: push,
            pushEnabled: push != nil, createdAt: Date(), publicKey: registration.publicKey, mayApproveResets: registration.mayApproveResets,
            offlineSecret: registration.offlineSecret)
        try await connection.run(
            """
            INSERT INTO devices (
                id, user_id, name, platform, fcm_token, push_provider, push_options, push_enabled, api_key_hash, created_at, public_key,
                may_approve_resets, offline_secret)
            VALUES (\(device.id), \(userID), \(device.name), \(device.platform), \(push?.token),
                \(PushAddress.storedProvider(of: push)), \(push?.storedOptions), \(device.pushEnabled), \(registration.apiKeyHash),
                \(device.createdAt.stored), \(registration.publicKey?.json), \(device.mayApproveResets), \(registration.offlineSecret))
            """, logger)
        return device
    }

    public func device(apiKeyHash: String) async throws -> Device? {
        let device = try await rows("SELECT * FROM devices WHERE api_key_hash = \(apiKeyHash)").first.map(Device.init(row:))
        // Seen now: written at most once a minute, so that most requests stay reads.
        let now = Date()
        if let device, (device.lastSeenAt.map { now.timeIntervalSince($0) } ?? .infinity) >= Device.lastSeenResolution {
            try await rows("UPDATE devices SET last_seen_at = \(now.stored) WHERE id = \(device.id) RETURNING id")
        }
        return device
    }

    public func devices(userID: String) async throws -> [Device] {
        try await rows("SELECT * FROM devices WHERE user_id = \(userID) ORDER BY created_at").map(Device.init(row:))
    }

    public func setDeviceKey(deviceID: String, key: DeviceKey, replacing current: DeviceKey?) async throws -> Bool {
        try await rows(
            """
            UPDATE devices SET public_key = \(key.json) WHERE id = \(deviceID) AND public_key IS NOT DISTINCT FROM \(current?.json) RETURNING id
            """
        ).count == 1
    }

    public func replaceAPIKey(deviceID: String, apiKeyHash: String, offlineSecret: Data?) async throws {
        try await rows(
            """
            UPDATE devices SET api_key_hash = \(apiKeyHash), may_approve_resets = true, offline_secret = \(offlineSecret), offline_step = NULL
            WHERE id = \(deviceID) RETURNING id
            """)
    }

    public func useProofs(_ uses: [ProofUse], until: Date, now: Date) async throws -> Bool {
        struct Reused: Error {}
        do {
            try await transaction { connection in
                try await connection.run("DELETE FROM used_proofs WHERE expires_at <= \(now.stored) RETURNING device_id", self.logger)
                for use in uses {
                    // Two nodes inserting the same proof: the key makes one of them wait, then find it.
                    let inserted = try await connection.run(
                        """
                        INSERT INTO used_proofs (device_id, thumbprint, issued_at, expires_at)
                        VALUES (\(use.deviceID), \(use.thumbprint), \(Int64(use.issuedAt)), \(until.stored))
                        ON CONFLICT DO NOTHING RETURNING device_id
                        """, self.logger)
                    // Thrown, so that none of them is recorded.
                    if inserted != 1 { throw Reused() }
                }
            }
            return true
        } catch is Reused {
            return false
        }
    }

    public func updatePushAddress(deviceID: String, push: PushAddress?) async throws {
        try await transaction { connection in
            guard let owner = try await connection.rows("SELECT user_id FROM devices WHERE id = \(deviceID) FOR UPDATE", self.logger).first else {
                return
            }
            let userID = try owner.get("user_id", as: String.self)
            let push = try await Self.addressUnlessClaimed(push, byOtherThan: userID, connection, self.logger)
            if let push {
                // The phone moved to this device of the same user: the old one stops getting its prompts.
                try await connection.run(
                    """
                    UPDATE devices SET fcm_token = NULL, push_enabled = false
                    WHERE fcm_token = \(push.token) AND user_id = \(userID) AND id != \(deviceID) RETURNING id
                    """, self.logger)
            }
            try await connection.run(
                """
                UPDATE devices SET fcm_token = \(push?.token), push_provider = \(PushAddress.storedProvider(of: push)),
                    push_options = \(push?.storedOptions), push_enabled = \(push != nil)
                WHERE id = \(deviceID) RETURNING id
                """, self.logger)
        }
    }

    /// `push`, unless a device of another user holds its token or endpoint: then `nil` (pull only).
    static func addressUnlessClaimed(
        _ push: PushAddress?, byOtherThan userID: String, _ connection: PostgresConnection, _ logger: Logger
    ) async throws
        -> PushAddress?
    {
        guard let push else { return nil }
        let claimed = try await connection.run(
            "SELECT 1 FROM devices WHERE fcm_token = \(push.token) AND user_id != \(userID) LIMIT 1", logger)
        return claimed > 0 ? nil : push
    }

    public func disablePush(deviceID: String, token: String) async throws {
        try await rows("UPDATE devices SET push_enabled = false WHERE id = \(deviceID) AND fcm_token = \(token) RETURNING id")
    }

    public func silencePrompts(userID: String, until: Date?) async throws {
        let changed = try await rows("UPDATE users SET silenced_until = \(until?.stored) WHERE id = \(userID) RETURNING id").count
        if changed == 0 { throw AccountError.unknownUser }
    }

    public func deleteDevice(id: String) async throws -> Bool {
        try await rows("DELETE FROM devices WHERE id = \(id) RETURNING id").count == 1
    }
}

extension User {
    init(row: PostgresRandomAccessRow) throws {
        self.init(
            id: try row.get("id"), email: try row.get("email"), passwordHash: try row.get("password_hash"), createdAt: try row.date("created_at"),
            silencedUntil: try row.optionalDate("silenced_until"))
    }
}

extension Device {
    init(row: PostgresRandomAccessRow) throws {
        self.init(
            id: try row.get("id"),
            userID: try row.get("user_id"),
            name: try row.get("name"),
            platform: try row.get("platform"),
            push: PushAddress(
                storedProvider: try row.get("push_provider"), token: try row.get("fcm_token"), options: try row.get("push_options")),
            pushEnabled: try row.get("push_enabled"),
            createdAt: try row.date("created_at"),
            publicKey: try (try row.get("public_key", as: String?.self)).map { stored throws(DeviceKey.Invalid) in try DeviceKey(stored: stored) },
            lastSeenAt: try row.optionalDate("last_seen_at"),
            mayApproveResets: try row.get("may_approve_resets"),
            offlineSecret: try row.get("offline_secret", as: Data?.self)
        )
    }
}

import CountersignCore
import CountersignSQL
import CountersignWire
import Foundation
import PostgresNIO

extension PostgresStore: AccountStore {
    public func createUser(email: String, passwordHash: String) async throws -> User {
        let user = User(id: SecureToken.recordID(), email: User.normalize(email: email), passwordHash: passwordHash, createdAt: Date())
        let inserted = try await transaction { connection in try await connection.perform(AccountSQL.insertUser(user), self.logger) }
        guard inserted == 1 else { throw AccountError.emailTaken }
        return user
    }

    public func user(email: String) async throws -> User? {
        try await fetch(AccountSQL.user(email: User.normalize(email: email))).first.map(User.init(row:))
    }

    public func user(id: String) async throws -> User? {
        try await fetch(AccountSQL.user(id: id)).first.map(User.init(row:))
    }

    public func users() async throws -> [User] {
        try await fetch(AccountSQL.users).map(User.init(row:))
    }

    public func rehashPassword(userID: String, from old: String, to new: String) async throws {
        try await fetch(AccountSQL.rehashPassword(userID: userID, from: old, to: new))
    }

    public func costliestPasswordHashCost() async throws -> Int? {
        try await fetch(AccountSQL.passwordHashPrefixes).compactMap { User.passwordHashCost(prefix: try $0.get("prefix")) }.max()
    }

    public func setPassword(userID: String, passwordHash: String) async throws {
        let changed = try await transaction { connection in
            // Live phone resets first, then the user: the order a completion takes its locks in.
            try await connection.run(
                "SELECT id FROM approval_requests WHERE user_id = \(userID) AND state IN ('pending', 'approved') FOR UPDATE", self.logger)
            for statement in AccountSQL.endOwnership(userID: userID, at: Date(), by: "password set by the operator (user passwd)") {
                try await connection.perform(statement, self.logger)
            }
            let changed = try await connection.perform(AccountSQL.setPassword(userID: userID, passwordHash: passwordHash), self.logger)
            if changed == 1 {
                _ = try await Self.cancelLivePhoneResets(userID: userID, now: Date(), by: "the operator (user passwd)", connection, self.logger)
            }
            return changed
        }
        if changed == 0 { throw AccountError.unknownUser }
    }

    public func registerDevice(_ registration: DeviceRegistration, maxDevices: Int) async throws -> RegisteredDevice {
        try await transaction { connection in try await Self.registerDevice(registration, maxDevices: maxDevices, connection, self.logger) }
    }

    /// Registers a device inside the caller's transaction (login, enrollment).
    static func registerDevice(
        _ registration: DeviceRegistration, maxDevices: Int, _ connection: PostgresConnection, _ logger: Logger
    ) async throws -> RegisteredDevice {
        let userID = registration.userID
        // The user's row is locked first: two registrations at once count each other's device.
        try await connection.run("SELECT id FROM users WHERE id = \(userID) FOR UPDATE", logger)
        // A token another account's device holds stays with it (see the SQLite store).
        var push = try await Self.addressUnlessClaimed(registration.push, byOtherThan: userID, connection, logger)
        // An enrollment never takes a device over (see the SQLite store): with a held token it is pull only.
        if !registration.mayApproveResets, let token = push?.token,
            try await connection.perform(AccountSQL.device(userID: userID, token: token), logger) > 0
        {
            push = nil
        }
        // A login with a held push address replaces that device, never takes it over (see the SQLite store).
        var replaced: Device?
        if let push,
            let existing = try await connection.fetch(AccountSQL.device(userID: userID, token: push.token).appending(" FOR UPDATE"), logger).first
        {
            let device = try Device(row: existing)
            try await connection.perform(AccountSQL.deleteDevice(id: device.id), logger)
            replaced = device
        }
        let count = try await connection.fetch(AccountSQL.deviceCount(userID: userID), logger).first?.get("n", as: Int.self) ?? 0
        guard count < maxDevices else { throw AccountError.tooManyDevices }
        let device = Device(registration, push: push)
        try await connection.perform(AccountSQL.insertDevice(device, apiKeyHash: registration.apiKeyHash), logger)
        if let replaced { try await Self.insert(registration.replacementEvent(of: replaced, by: device), connection, logger) }
        return RegisteredDevice(device: device, replaced: replaced)
    }

    public func device(apiKeyHash: String) async throws -> Device? {
        let device = try await fetch(AccountSQL.device(apiKeyHash: apiKeyHash)).first.map(Device.init(row:))
        // Seen now: written at most once a minute, so that most requests stay reads.
        let now = Date()
        if let device, device.isDueToBeSeen(at: now) {
            try await fetch(AccountSQL.seen(deviceID: device.id, at: now))
        }
        return device
    }

    public func devices(userID: String) async throws -> [Device] {
        try await fetch(AccountSQL.devices(userID: userID)).map(Device.init(row:))
    }

    public func setDeviceKey(deviceID: String, key: DeviceKey, replacing current: DeviceKey?) async throws -> Bool {
        try await fetch(AccountSQL.setKey(deviceID: deviceID, key: key, replacing: current, .postgres)).count == 1
    }

    public func setSealKey(deviceID: String, key: SealKey?) async throws {
        try await fetch(AccountSQL.setSealKey(deviceID: deviceID, key: key))
    }

    public func replaceAPIKey(deviceID: String, apiKeyHash: String, offlineSecret: Data?) async throws {
        try await fetch(AccountSQL.replaceAPIKey(deviceID: deviceID, apiKeyHash: apiKeyHash, offlineSecret: offlineSecret))
    }

    public func useProofs(_ uses: [ProofUse], until: Date, now: Date) async throws -> Bool {
        struct Reused: Error {}
        do {
            try await transaction { connection in
                try await connection.perform(AccountSQL.forgetProofs(expiredBy: now), self.logger)
                for use in uses {
                    // Two nodes inserting the same proof: the key makes one of them wait, then find it.
                    // Thrown, so that none of them is recorded.
                    if try await connection.perform(AccountSQL.useProof(use, until: until), self.logger) != 1 { throw Reused() }
                }
            }
            return true
        } catch is Reused {
            return false
        }
    }

    public func updatePushAddress(deviceID: String, push: PushAddress?) async throws {
        try await transaction { connection in
            guard let owner = try await connection.fetch(AccountSQL.deviceOwner(deviceID: deviceID).appending(" FOR UPDATE"), self.logger).first
            else { return }
            let userID = try owner.get("user_id", as: String.self)
            let push = try await Self.addressUnlessClaimed(push, byOtherThan: userID, connection, self.logger)
            if let push {
                // The phone moved to this device of the same user: the old one stops getting its prompts.
                try await connection.perform(AccountSQL.releaseToken(push.token, userID: userID, keeping: deviceID), self.logger)
            }
            try await connection.perform(AccountSQL.setPushAddress(deviceID: deviceID, push: push), self.logger)
        }
    }

    /// `push`, unless a device of another user holds its token or endpoint: then `nil` (pull only).
    static func addressUnlessClaimed(
        _ push: PushAddress?, byOtherThan userID: String, _ connection: PostgresConnection, _ logger: Logger
    ) async throws -> PushAddress? {
        guard let push else { return nil }
        return try await connection.perform(AccountSQL.tokenHeld(push.token, byOtherThan: userID), logger) > 0 ? nil : push
    }

    public func disablePush(deviceID: String, token: String) async throws {
        try await fetch(AccountSQL.disablePush(deviceID: deviceID, token: token))
    }

    public func silencePrompts(userID: String, until: Date?) async throws {
        if try await fetch(AccountSQL.silence(userID: userID, until: until)).isEmpty { throw AccountError.unknownUser }
    }

    public func deleteDevice(id: String) async throws -> Bool {
        try await fetch(AccountSQL.deleteDevice(id: id)).count == 1
    }
}

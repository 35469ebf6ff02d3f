import CountersignCore
import CountersignSQL
import CountersignWire
import Foundation
import GRDB

extension SQLiteStore: AccountStore {
    public func createUser(email: String, passwordHash: String) async throws -> User {
        let user = User(id: SecureToken.recordID(), email: User.normalize(email: email), passwordHash: passwordHash, createdAt: Date())
        return try await pool.write { db in
            guard try db.perform(AccountSQL.insertUser(user)) == 1 else { throw AccountError.emailTaken }
            return user
        }
    }

    public func user(email: String) async throws -> User? {
        try readNow { db in try db.fetchFirst(AccountSQL.user(email: User.normalize(email: email))).map(User.init(row:)) }
    }

    public func user(id: String) async throws -> User? {
        try await pool.read { db in try db.fetchFirst(AccountSQL.user(id: id)).map(User.init(row:)) }
    }

    public func users() async throws -> [User] {
        try await pool.read { db in try db.fetch(AccountSQL.users).map(User.init(row:)) }
    }

    public func rehashPassword(userID: String, from old: String, to new: String) async throws {
        _ = try await pool.write { db in try db.perform(AccountSQL.rehashPassword(userID: userID, from: old, to: new)) }
    }

    public func costliestPasswordHashCost() async throws -> Int? {
        try await pool.read { db in
            try db.fetch(AccountSQL.passwordHashPrefixes).compactMap { User.passwordHashCost(prefix: try $0.get("prefix")) }.max()
        }
    }

    public func setPassword(userID: String, passwordHash: String) async throws {
        try await pool.write { db in
            for statement in AccountSQL.endOwnership(userID: userID, at: Date(), by: "password set by the operator (user passwd)") {
                try db.perform(statement)
            }
            if try db.perform(AccountSQL.setPassword(userID: userID, passwordHash: passwordHash)) == 0 { throw AccountError.unknownUser }
            _ = try Self.cancelLivePhoneResets(userID: userID, now: Date(), by: "the operator (user passwd)", db)
        }
    }

    public func registerDevice(_ registration: DeviceRegistration, maxDevices: Int) async throws -> RegisteredDevice {
        try await pool.write { db in try Self.registerDevice(registration, maxDevices: maxDevices, db) }
    }

    /// Registers a device inside the caller's transaction (login, enrollment).
    static func registerDevice(_ registration: DeviceRegistration, maxDevices: Int, _ db: Database) throws -> RegisteredDevice {
        let userID = registration.userID
        // A token another account's device holds stays with it: whoever presents it
        // must not silence that device's prompts, nor have their own prompts shown there.
        var push = try Self.addressUnlessClaimed(registration.push, byOtherThan: userID, db)
        // An enrollment never takes a device over (its key, its right to answer
        // resets): with a token one of the user's devices holds, it is pull only.
        if !registration.mayApproveResets, let token = push?.token, try db.exists(AccountSQL.device(userID: userID, token: token)) {
            push = nil
        }
        // A login with the push address one of the user's devices holds: that device is
        // replaced, never taken over. It is signed out here, and the login gets a new device
        // (new id, new key): an identity changes only with the old key's proof.
        var replaced: Device?
        if let push, let existing = try db.fetchFirst(AccountSQL.device(userID: userID, token: push.token)) {
            replaced = try Device(row: existing)
            try db.perform(AccountSQL.deleteDevice(id: try existing.get("id")))
        }
        let count = try db.fetchFirst(AccountSQL.deviceCount(userID: userID))?.get("n", as: Int.self) ?? 0
        guard count < maxDevices else { throw AccountError.tooManyDevices }
        let device = Device(registration, push: push)
        try db.perform(AccountSQL.insertDevice(device, apiKeyHash: registration.apiKeyHash))
        if let replaced { try Self.insert(registration.replacementEvent(of: replaced, by: device), db) }
        return RegisteredDevice(device: device, replaced: replaced)
    }

    public func device(apiKeyHash: String) async throws -> Device? {
        let device = try readNow { db in try db.fetchFirst(AccountSQL.device(apiKeyHash: apiKeyHash)).map(Device.init(row:)) }
        // Seen now: written at most once a minute, so that most requests stay reads.
        let now = Date()
        if let device, device.isDueToBeSeen(at: now) {
            _ = try await pool.write { db in try db.perform(AccountSQL.seen(deviceID: device.id, at: now)) }
        }
        return device
    }

    public func devices(userID: String) async throws -> [Device] {
        try readNow { db in try db.fetch(AccountSQL.devices(userID: userID)).map(Device.init(row:)) }
    }

    public func setDeviceKey(deviceID: String, key: DeviceKey, replacing current: DeviceKey?) async throws -> Bool {
        try await pool.write { db in try db.perform(AccountSQL.setKey(deviceID: deviceID, key: key, replacing: current, .sqlite)) == 1 }
    }

    public func setSealKey(deviceID: String, key: SealKey?) async throws {
        _ = try await pool.write { db in try db.perform(AccountSQL.setSealKey(deviceID: deviceID, key: key)) }
    }

    public func replaceAPIKey(deviceID: String, apiKeyHash: String, offlineSecret: Data?) async throws {
        _ = try await pool.write { db in
            try db.perform(AccountSQL.replaceAPIKey(deviceID: deviceID, apiKeyHash: apiKeyHash, offlineSecret: offlineSecret))
        }
    }

    public func useProofs(_ uses: [ProofUse], until: Date, now: Date) async throws -> Bool {
        struct Reused: Error {}
        do {
            try await pool.write { db in
                try db.perform(AccountSQL.forgetProofs(expiredBy: now))
                for use in uses {
                    // Thrown, so that none of them is recorded.
                    if try db.perform(AccountSQL.useProof(use, until: until)) != 1 { throw Reused() }
                }
            }
            return true
        } catch is Reused {
            return false
        }
    }

    public func updatePushAddress(deviceID: String, push: PushAddress?) async throws {
        try await pool.write { db in
            guard let userID = try db.fetchFirst(AccountSQL.deviceOwner(deviceID: deviceID))?.get("user_id", as: String.self) else { return }
            let push = try Self.addressUnlessClaimed(push, byOtherThan: userID, db)
            if let push {
                // The phone moved to this device of the same user: the old one stops getting its prompts.
                try db.perform(AccountSQL.releaseToken(push.token, userID: userID, keeping: deviceID))
            }
            try db.perform(AccountSQL.setPushAddress(deviceID: deviceID, push: push))
        }
    }

    /// `push`, unless a device of another user holds its token or endpoint: then `nil` (pull only).
    static func addressUnlessClaimed(_ push: PushAddress?, byOtherThan userID: String, _ db: Database) throws -> PushAddress? {
        guard let push else { return nil }
        return try db.exists(AccountSQL.tokenHeld(push.token, byOtherThan: userID)) ? nil : push
    }

    public func disablePush(deviceID: String, token: String) async throws {
        _ = try await pool.write { db in try db.perform(AccountSQL.disablePush(deviceID: deviceID, token: token)) }
    }

    public func silencePrompts(userID: String, until: Date?) async throws {
        try await pool.write { db in
            if try db.perform(AccountSQL.silence(userID: userID, until: until)) == 0 { throw AccountError.unknownUser }
        }
    }

    public func deleteDevice(id: String) async throws -> Bool {
        try await pool.write { db in try db.perform(AccountSQL.deleteDevice(id: id)) == 1 }
    }
}

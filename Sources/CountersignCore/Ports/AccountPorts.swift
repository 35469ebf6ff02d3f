import CountersignWire
import Foundation

// The account store, split by who uses it: each consumer sees only what it needs,
// and a backend implements them all (``AccountStore``).

/// What the broker needs of accounts: who a request is for, and silencing a
/// user's prompts after a fraud report.
public protocol ApproverDirectory: Sendable {
    func user(email: String) async throws -> User?
    /// Silences a user's prompts until `until` (a fraud report); `nil` lifts it.
    func silencePrompts(userID: String, until: Date?) async throws
}

/// Finding the trusted device behind an API key (every device route).
public protocol DeviceDirectory: Sendable {
    func device(apiKeyHash: String) async throws -> Device?
}

/// What a device's own routes need: sign in, key refresh, push token, sign out.
public protocol DeviceAccountStore: DeviceDirectory {
    func user(email: String) async throws -> User?
    func user(id: String) async throws -> User?
    /// Registers a new device (a new id). A login whose push token one of the
    /// user's devices holds replaces that device: it is signed out (its API key
    /// and key stop working) in the same transaction, and named in the answer;
    /// a device's identity is never taken over. An enrollment with such a token
    /// is pull only. A push token that a device of another user holds is not
    /// taken: the new device is pull only.
    /// A new device beyond `maxDevices` of the user throws ``AccountError/tooManyDevices``, creating nothing.
    func registerDevice(_ registration: DeviceRegistration, maxDevices: Int) async throws -> RegisteredDevice
    /// Sets or replaces the key a device signs its answers with, if its key is
    /// still `current` (what the proofs were checked against): `false` when it changed meanwhile.
    func setDeviceKey(deviceID: String, key: DeviceKey, replacing current: DeviceKey?) async throws -> Bool
    /// Replaces a password hash with one of the same password at the configured
    /// cost, unless the password changed meanwhile (`from` is no longer stored).
    func rehashPassword(userID: String, from old: String, to new: String) async throws
    /// A new API key, given for the password: the device may approve resets from
    /// now on. Its offline secret is replaced too (`nil`: none), voiding the old one's codes.
    func replaceAPIKey(deviceID: String, apiKeyHash: String, offlineSecret: Data?) async throws
    /// Records proofs of possession as used until `until`, all or none: `false`
    /// when any was used before (on any node, before any restart).
    func useProofs(_ uses: [ProofUse], until: Date, now: Date) async throws -> Bool
    /// Sets a new push address (any provider); a device whose address died gets
    /// push back. A token or endpoint that a device of another user holds stays
    /// there: this device is left pull only.
    func updatePushAddress(deviceID: String, push: PushAddress?) async throws
    /// Sets or removes (`nil`) the key the device's pushes are sealed to.
    func setSealKey(deviceID: String, key: SealKey?) async throws
    func deleteDevice(id: String) async throws -> Bool
}

/// What push needs when a token turns out to be dead.
public protocol PushTokenStore: Sendable {
    /// Stops pushing to a device whose token or endpoint its push service
    /// rejected, unless the device's address changed meanwhile.
    func disablePush(deviceID: String, token: String) async throws
}

/// What the push dispatcher needs: the devices to prompt.
public protocol PushTargetStore: PushTokenStore {
    func devices(userID: String) async throws -> [Device]
}

/// What an operator's commands need: users, their passwords and devices.
public protocol UserAdministration: Sendable {
    func createUser(email: String, passwordHash: String) async throws -> User
    func user(email: String) async throws -> User?
    func users() async throws -> [User]
    /// The cost of the costliest password hash stored (`nil`: none).
    func costliestPasswordHashCost() async throws -> Int?
    /// Sets the password and, in the same transaction, cancels the user's live
    /// phone resets (one recovery at a time), audited.
    func setPassword(userID: String, passwordHash: String) async throws
    func devices(userID: String) async throws -> [Device]
    func deleteDevice(id: String) async throws -> Bool
    func silencePrompts(userID: String, until: Date?) async throws
}

/// Users and their trusted devices: every account port, as a backend implements them.
public typealias AccountStore = ApproverDirectory & DeviceAccountStore & PushTargetStore & UserAdministration

extension DeviceAccountStore {
    /// A signed-in device (it may approve resets), with no bound on the user's devices.
    public func registerDevice(
        userID: String, name: String, platform: String, push: PushAddress?, apiKeyHash: String, publicKey: DeviceKey?
    ) async throws -> Device {
        try await registerDevice(
            DeviceRegistration(
                userID: userID, name: name, platform: platform, push: push, apiKeyHash: apiKeyHash, publicKey: publicKey,
                mayApproveResets: true),
            maxDevices: .max
        ).device
    }
}

/// A device just registered, and the device it replaced (signed out in the same transaction), if any.
public struct RegisteredDevice: Sendable, Equatable {
    public var device: Device
    /// The user's device that held the push address the login brought.
    public var replaced: Device?

    public init(device: Device, replaced: Device? = nil) {
        self.device = device
        self.replaced = replaced
    }
}

public enum AccountError: Error, Equatable {
    case emailTaken
    case unknownUser
    /// The user has as many devices as allowed.
    case tooManyDevices
}

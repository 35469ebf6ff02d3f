import Foundation
import Logging

/// Durable home of approval requests. Every method is one SQLite transaction.
public protocol ApprovalStore: Sendable {
    /// Inserts `request` and, in the same transaction, cancels every other
    /// request of the same subject and action that is still pending at
    /// `request.createdAt` (``TransitionCause/supersededByNewerRequest``).
    /// Doing both in one transaction keeps "one pending request per subject"
    /// true however many initiations race. Returns the ids it cancelled.
    func insert(_ request: ApprovalRequest) async throws -> [String]
    func request(id: String) async throws -> ApprovalRequest?
    /// Requests in a live state (pending or approved), for the broker's index.
    func liveRequests() async throws -> [ApprovalRequest]
    /// Persists `request` as the result of `transition` only if the row still
    /// holds `transition.from` and that state's deadline has not passed (for a
    /// time-out: has passed). Completing also sets the user's password from the
    /// held hash, in the same transaction. Returns whether this call won.
    func apply(_ transition: Transition, to request: ApprovalRequest) async throws -> Bool
}

/// Users and their trusted devices.
public protocol AccountStore: Sendable {
    func createUser(email: String, passwordHash: String) async throws -> User
    func user(email: String) async throws -> User?
    func user(id: String) async throws -> User?
    func users() async throws -> [User]
    func setPassword(userID: String, passwordHash: String) async throws
    /// Registers a device. A push token equal to one of the user's devices
    /// replaces that device (its old key stops working).
    func registerDevice(
        userID: String,
        name: String,
        platform: String,
        fcmToken: String?,
        apiKeyHash: String
    ) async throws -> Device
    func device(apiKeyHash: String) async throws -> Device?
    func devices(userID: String) async throws -> [Device]
    func replaceAPIKey(deviceID: String, apiKeyHash: String) async throws
    /// Sets a new push token; a device whose token died gets push back.
    func updatePushToken(deviceID: String, fcmToken: String?) async throws
    /// Stops pushing to a device whose token FCM rejected, unless the token changed meanwhile.
    func disablePush(deviceID: String, fcmToken: String) async throws
    func deleteDevice(id: String) async throws -> Bool
    /// Silences a user's prompts until `until` (a fraud report); `nil` lifts it.
    func silencePrompts(userID: String, until: Date?) async throws
}

public enum AccountError: Error, Equatable {
    case emailTaken
    case unknownUser
}

/// One push to carry out; the dispatcher finds the devices.
public enum PushJob: Sendable, Equatable {
    /// A new request: prompt every push-enabled device of the user.
    case prompt(requestID: String, userID: String, action: ApprovalAction, expiresAt: Date, requester: RequesterInfo)
    /// The request left pending: tell the devices to drop the prompt.
    case resolved(requestID: String, userID: String, status: ApprovalState)
}

/// How one push to one device ended, for the audit trail, logs and metrics.
public enum PushOutcome: String, Sendable, CaseIterable {
    /// The push service accepted the message.
    case sent
    /// Push is not configured: nothing was sent.
    case disabled
    /// The token is dead (unregistered, wrong sender, malformed): the device gets no more pushes until it sends a new one.
    case tokenDead = "token_dead"
    /// The push service refused the message for good (no retry).
    case rejected
    /// Retries ran out, or could not finish before the request expired: dropped.
    case dropped
    /// The push service refused our credentials.
    case authError = "auth_error"
}

/// Delivers one push message to one device.
public protocol PushSender: Sendable {
    func send(_ job: PushJob, to device: Device, logger: Logger) async -> PushOutcome
}

/// Slow, salted password hashing (bcrypt). Implementations keep the work off event loops.
public protocol PasswordHasher: Sendable {
    func hash(_ password: String) async throws -> String
    func verify(_ password: String, hash: String) async throws -> Bool
}

import Foundation

/// What answering a request with a typed code needs: the user's devices
/// (with their sealed offline secrets), each device's last accepted step,
/// the request's count of wrong codes, and the bypass codes an operator issued.
public protocol OfflineCodeStore: Sendable {
    func devices(userID: String) async throws -> [Device]
    /// Records `step` as the device's last accepted offline code, only if it is
    /// later than the one recorded and the device still holds the secret
    /// `sealed` (the one the code was checked against) and, with
    /// `resetRight`, may still answer a password reset: `false` for a code
    /// (device, step) used before, older than the last one used, or of a
    /// secret replaced meanwhile.
    func useOfflineStep(deviceID: String, step: Int64, sealed: Data, resetRight: Bool) async throws -> Bool
    /// Takes one of the tries a pending request has for typed codes, before
    /// the code is checked: the number of this try (1 for the first), or `nil`
    /// when the request is not pending or has no try left (`limit` taken).
    func takeCodeTry(requestID: String, limit: Int) async throws -> Int?
    /// Takes one of the wrong codes a user may type per `window` across every
    /// route and address, before the code is checked: this try's number in the
    /// window, or when the user has none left, when the window ends.
    func takeUserCodeTry(userID: String, limit: Int, window: TimeInterval, now: Date) async throws -> UserCodeTry
    /// Gives back a try ``takeUserCodeTry(userID:limit:window:now:)`` took in the window that began at
    /// `windowStart`, for a right code or one never checked; nothing once another window began.
    func giveBackUserCodeTry(userID: String, windowStart: Date) async throws
    /// Forgets the user's wrong codes (`countersign user unlock`); `false` for an unknown user.
    func unlockCodes(userID: String) async throws -> Bool
    /// Uses the user's bypass code stored under `codeHash`, if it is unused and
    /// valid at `now` (and issued for password resets, when `passwordReset`):
    /// `true` for the one caller that used it.
    func useBypassCode(userID: String, codeHash: String, passwordReset: Bool, now: Date) async throws -> Bool
    /// Makes a code ``useBypassCode(userID:codeHash:passwordReset:now:)`` used at `usedAt` unused again
    /// (the approval it was for lost to another answer).
    func restoreBypassCode(userID: String, codeHash: String, usedAt: Date) async throws
    /// Replaces every bypass code of the user with these, in one transaction.
    func replaceBypassCodes(userID: String, codeHashes: [String], forPasswordReset: Bool, expiresAt: Date, now: Date) async throws
    /// Voids the user's unused bypass codes; returns how many there were.
    func revokeBypassCodes(userID: String, now: Date) async throws -> Int
}

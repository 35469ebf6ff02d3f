import Foundation

/// What answering a request with a typed code needs: the user's devices
/// (with their sealed offline secrets), each device's last accepted step,
/// the request's count of wrong codes, and the bypass codes an operator issued.
public protocol OfflineCodeStore: Sendable {
    func devices(userID: String) async throws -> [Device]
    /// Records `step` as the device's last accepted offline code, only if it is
    /// later than the one recorded: `false` for a code (device, step) used
    /// before, or older than the last one used.
    func useOfflineStep(deviceID: String, step: Int64) async throws -> Bool
    /// Counts one wrong code against a pending request; returns the count so
    /// far (0 when the request is not pending).
    func countWrongCode(requestID: String) async throws -> Int
    /// Uses the user's bypass code stored under `codeHash`, if it is unused and
    /// valid at `now` (and issued for password resets, when `passwordReset`):
    /// `true` for the one caller that used it.
    func useBypassCode(userID: String, codeHash: String, passwordReset: Bool, now: Date) async throws -> Bool
    /// Replaces every bypass code of the user with these, in one transaction.
    func replaceBypassCodes(userID: String, codeHashes: [String], forPasswordReset: Bool, expiresAt: Date, now: Date) async throws
    /// Voids the user's unused bypass codes; returns how many there were.
    func revokeBypassCodes(userID: String, now: Date) async throws -> Int
}

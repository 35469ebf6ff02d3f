import Crypto
import Foundation
import Logging

/// The daemon's VAPID key: an EC P-256 private key in PEM (PKCS#8), created
/// on first start (mode 0600) when missing. Subscriptions are made for this
/// key: a new one means every Web Push device must subscribe again.
public enum VAPIDKeyFile {
    public static func load(path: String, create: Bool, logger: Logger) throws -> P256.Signing.PrivateKey {
        if !FileManager.default.fileExists(atPath: path) {
            guard create else { throw ServiceAccountError("VAPID key file \(path) does not exist") }
            if try make(path: path) { logger.notice("created the daemon's VAPID key for Web Push", metadata: ["file": "\(path)"]) }
        }
        guard let data = FileManager.default.contents(atPath: path) else { throw ServiceAccountError("cannot read the VAPID key file \(path)") }
        do {
            return try P256.Signing.PrivateKey(pemRepresentation: String(decoding: data, as: UTF8.self))
        } catch {
            throw ServiceAccountError("the VAPID key file \(path) does not hold an EC P-256 private key in PEM form")
        }
    }

    /// Writes a new key whole to a file of its own, then links it into place:
    /// never replaces an existing file, and a process starting at the same
    /// moment never reads a half-written one. `false`: another process made it first.
    static func make(path: String) throws -> Bool {
        let staging = "\(path).\(getpid()).new"
        let descriptor = open(staging, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            throw ServiceAccountError("cannot create the VAPID key file \(path): \(String(cString: strerror(errno)))")
        }
        defer { unlink(staging) }
        let pem = Array(P256.Signing.PrivateKey().pemRepresentation.utf8) + [0x0A]
        let written = pem.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
        let synced = written == pem.count && fsync(descriptor) == 0
        close(descriptor)
        guard synced else { throw ServiceAccountError("cannot write the VAPID key file \(path): \(String(cString: strerror(errno)))") }
        guard link(staging, path) == 0 else {
            if errno == EEXIST { return false }
            throw ServiceAccountError("cannot create the VAPID key file \(path): \(String(cString: strerror(errno)))")
        }
        return true
    }
}

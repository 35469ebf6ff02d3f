import CountersignCore
import Crypto
import Foundation
import Logging

/// The daemon's own secret, outside the database: reset codes and link
/// tokens are stored as HMACs under a key derived from it, and queued mail
/// is sealed with another, so a copy of the database alone reveals neither.
public enum SecretKeyFile {
    /// Reads the key at `path`; creates it (32 random bytes, mode 0600) when
    /// it does not exist and `create` is set.
    public static func load(path: String, create: Bool, logger: Logger) throws -> SecretKeys {
        if !FileManager.default.fileExists(atPath: path) {
            guard create else { throw ConfigurationError("secret key file \(path) does not exist") }
            try make(path: path)
            logger.notice("created the daemon's secret key", metadata: ["file": "\(path)"])
        }
        guard let data = FileManager.default.contents(atPath: path) else {
            throw ConfigurationError("cannot read the secret key file \(path)")
        }
        guard data.count >= SecretKeys.byteCount else {
            throw ConfigurationError(
                "the secret key file \(path) holds \(data.count) bytes; it needs at least \(SecretKeys.byteCount) (head -c 32 /dev/urandom > FILE)")
        }
        return SecretKeys(master: SymmetricKey(data: data))
    }

    /// Writes a new key; never replaces an existing file (two processes starting at once keep the first).
    static func make(path: String) throws {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        if descriptor < 0 {
            if errno == EEXIST { return }
            throw ConfigurationError("cannot create the secret key file \(path): \(String(cString: strerror(errno)))")
        }
        defer { close(descriptor) }
        let key = SymmetricKey(size: .bits256)
        let written = key.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
        guard written == SecretKeys.byteCount, fsync(descriptor) == 0 else {
            unlink(path)
            throw ConfigurationError("cannot write the secret key file \(path): \(String(cString: strerror(errno)))")
        }
    }
}

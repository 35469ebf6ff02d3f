import Crypto
import Foundation

/// What the daemon gave a device when it signed in or enrolled: kept by a
/// ``DeviceKeyStore`` beside the device's key, so that the device keeps its
/// identity across runs (one trusted device, not one per start).
public struct DeviceCredentials: Codable, Sendable, Equatable, CustomStringConvertible {
    /// The daemon's address, e.g. `https://auth.example.com`.
    public var baseURL: String
    /// The device's id, as `device list` and the `/v1` device routes name it.
    public var deviceID: String
    /// The user's id.
    public var userID: String
    /// The user's email, as the daemon stores it (lower case).
    public var email: String
    /// The device's API key (`X-API-Key`): a credential, keep it like a password.
    public var apiKey: String
    /// Whether the daemon bound the device's answers to its P-256 key.
    public var keyBound: Bool
    /// The offline-code secret (base32), when the daemon runs with offline codes on: a credential too.
    public var offlineSecret: String?

    /// Credentials as a sign-in or enrollment answer gave them.
    public init(
        baseURL: String, deviceID: String, userID: String, email: String, apiKey: String, keyBound: Bool, offlineSecret: String?
    ) {
        self.baseURL = baseURL
        self.deviceID = deviceID
        self.userID = userID
        self.email = email
        self.apiKey = apiKey
        self.keyBound = keyBound
        self.offlineSecret = offlineSecret
    }

    /// Names the device; never shows the API key or the offline secret.
    public var description: String {
        "DeviceCredentials(device \(deviceID) of \(email) at \(baseURL), key-bound: \(keyBound), offline codes: \(offlineSecret != nil))"
    }
}

/// Where a device keeps its keys (the signing key behind a ``DeviceSigner``, the
/// sealing key beside it) and its ``DeviceCredentials``.
///
/// ``FileKeyStore`` keeps them in one file (mode 0600): right for a test
/// device, a command-line tool or a server-side agent. A phone app keeps the
/// credentials and the sealing key in the Keychain (iOS) or encrypted by a
/// Keystore key (Android), and its signing key in the Secure Enclave or the
/// Keystore, where no one reads it; see `docs/phone-app.md`.
public protocol DeviceKeyStore: Sendable {
    /// What signs the device's answers and proofs: its key made on the first call, the same on every later one.
    func signer() async throws -> any DeviceSigner
    /// The key its pushes are sealed to (``DeviceNotice/init(sealedPushData:sealKey:)`` opens them with it):
    /// another key than the signing key, made on the first call, the same on every later one.
    func sealingKey() async throws -> P256.KeyAgreement.PrivateKey
    /// What the daemon gave the device; `nil` before it signed in (or after it signed out).
    func credentials() async throws -> DeviceCredentials?
    /// Keeps `credentials` (`nil`: forgets them, the key stays).
    func save(_ credentials: DeviceCredentials?) async throws
}

/// A ``DeviceKeyStore`` in one JSON file, created with mode 0600 (the key in
/// PEM, the credentials beside it). Not for a phone: there the key belongs in
/// the platform's key store.
public actor FileKeyStore: DeviceKeyStore {
    /// The file's path.
    public nonisolated let path: String
    private var cached: Contents?

    struct Contents: Codable {
        var privateKeyPEM: String
        /// The sealing key, made on first use (files of earlier versions have none yet).
        var sealingKeyPEM: String?
        var credentials: DeviceCredentials?
    }

    /// The store in the file at `path`, made (with a new key) on first use.
    public init(path: String) {
        self.path = path
    }

    public func signer() async throws -> any DeviceSigner {
        SoftwareSigner(key: try P256.Signing.PrivateKey(pemRepresentation: try load().privateKeyPEM))
    }

    public func sealingKey() async throws -> P256.KeyAgreement.PrivateKey {
        if let pem = try load().sealingKeyPEM { return try P256.KeyAgreement.PrivateKey(pemRepresentation: pem) }
        // A file of an earlier version: read again (another process may have made the key meanwhile) before making one.
        cached = nil
        var contents = try load()
        if let pem = contents.sealingKeyPEM { return try P256.KeyAgreement.PrivateKey(pemRepresentation: pem) }
        let made = P256.KeyAgreement.PrivateKey()
        contents.sealingKeyPEM = made.pemRepresentation
        try write(contents)
        return made
    }

    public func credentials() async throws -> DeviceCredentials? {
        try load().credentials
    }

    public func save(_ credentials: DeviceCredentials?) async throws {
        var contents = try load()
        contents.credentials = credentials
        try write(contents)
    }

    /// The file's contents; a new key (written at once) when there is no file
    /// yet. Only a file that does not exist is made anew: one that cannot be
    /// read is an error, never replaced.
    private func load() throws -> Contents {
        if let cached { return cached }
        guard let data = try Self.read(path) else {
            let made = Contents(
                privateKeyPEM: P256.Signing.PrivateKey().pemRepresentation, sealingKeyPEM: P256.KeyAgreement.PrivateKey().pemRepresentation,
                credentials: nil)
            // Another process may make the file at the same moment: the first one made is the device's.
            if try write(made, replacing: false) {
                return made
            }
            return try load()
        }
        do {
            let contents = try JSONDecoder().decode(Contents.self, from: data)
            _ = try P256.Signing.PrivateKey(pemRepresentation: contents.privateKeyPEM)
            if let sealing = contents.sealingKeyPEM { _ = try P256.KeyAgreement.PrivateKey(pemRepresentation: sealing) }
            cached = contents
            return contents
        } catch {
            throw DeviceError.keyStore("\(path) is not a device key file: \(error)")
        }
    }

    /// The bytes at `path`; `nil` only when there is no such file.
    private static func read(_ path: String) throws -> Data? {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else {
            if errno == ENOENT { return nil }
            throw DeviceError.keyStore("cannot read \(path): \(String(cString: strerror(errno)))")
        }
        let handle = FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
        do {
            return try handle.readToEnd() ?? Data()
        } catch {
            throw DeviceError.keyStore("cannot read \(path): \(error)")
        }
    }

    /// Replaces the file whole: a temporary file, created readable by its owner
    /// only (never wider, not even for a moment), synced, then renamed over it.
    private func write(_ contents: Contents) throws {
        _ = try write(contents, replacing: true)
    }

    /// Writes `contents` to the file, whole; without `replacing`, only if there
    /// is no file yet (`false` then, writing nothing).
    private func write(_ contents: Contents, replacing: Bool) throws -> Bool {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        let data = try encoder.encode(contents)
        let temporary = path + ".tmp-" + UUID().uuidString
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw DeviceError.keyStore("cannot create \(temporary): \(String(cString: strerror(errno)))") }
        defer { unlink(temporary) }
        let written = data.withUnsafeBytes { Foundation.write(descriptor, $0.baseAddress, $0.count) }
        let synced = fsync(descriptor) == 0
        close(descriptor)
        guard written == data.count, synced else {
            throw DeviceError.keyStore("cannot write \(temporary): \(String(cString: strerror(errno)))")
        }
        if replacing {
            guard rename(temporary, path) == 0 else { throw DeviceError.keyStore("cannot replace \(path): \(String(cString: strerror(errno)))") }
        } else if link(temporary, path) != 0 {
            if errno == EEXIST { return false }
            throw DeviceError.keyStore("cannot create \(path): \(String(cString: strerror(errno)))")
        }
        cached = contents
        return true
    }
}

/// A ``DeviceKeyStore`` in memory: a device that lives as long as the process (tests, demos).
public actor MemoryKeyStore: DeviceKeyStore {
    private let key: any DeviceSigner
    private let sealing = P256.KeyAgreement.PrivateKey()
    private var kept: DeviceCredentials?

    /// A new device: a fresh sealing key, no credentials, answers signed by `signer`
    /// (by default a fresh key in memory).
    public init(signer: any DeviceSigner = SoftwareSigner(key: P256.Signing.PrivateKey())) {
        key = signer
    }

    public func signer() async throws -> any DeviceSigner { key }
    public func sealingKey() async throws -> P256.KeyAgreement.PrivateKey { sealing }
    public func credentials() async throws -> DeviceCredentials? { kept }
    public func save(_ credentials: DeviceCredentials?) async throws { kept = credentials }
}

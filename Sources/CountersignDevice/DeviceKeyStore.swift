import Foundation
import JWTKit

/// What the daemon gave a device when it signed in or enrolled: kept by a
/// ``DeviceKeyStore`` beside the device's key, so that the device keeps its
/// identity across runs (one trusted device, not one per start).
public struct DeviceCredentials: Codable, Sendable, Equatable {
    /// The daemon's address, e.g. `https://auth.example.com`.
    public var baseURL: String
    public var deviceID: String
    public var userID: String
    public var email: String
    /// The device's API key (`X-API-Key`): a credential, keep it like a password.
    public var apiKey: String
    /// Whether the daemon bound the device's answers to its P-256 key.
    public var keyBound: Bool
    /// The offline-code secret (base32), when the daemon runs with offline codes on: a credential too.
    public var offlineSecret: String?

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
}

/// Where a device keeps its P-256 signing key and its ``DeviceCredentials``.
///
/// ``FileKeyStore`` keeps both in one file (mode 0600): right for a test
/// device, a command-line tool or a server-side agent. A phone app keeps the
/// credentials in the Keychain / Keystore, and its key where the platform
/// protects it best; see the README's note on the Secure Enclave.
public protocol DeviceKeyStore: Sendable {
    /// The key the device signs its answers with: made on the first call, the same on every later one.
    func signingKey() async throws -> ES256PrivateKey
    /// What the daemon gave the device; `nil` before it signed in (or after it signed out).
    func credentials() async throws -> DeviceCredentials?
    /// Keeps `credentials` (`nil`: forgets them, the key stays).
    func save(_ credentials: DeviceCredentials?) async throws
}

/// A ``DeviceKeyStore`` in one JSON file, created with mode 0600 (the key in
/// PEM, the credentials beside it). Not for a phone: there the key belongs in
/// the platform's key store.
public actor FileKeyStore: DeviceKeyStore {
    public nonisolated let path: String
    private var cached: Contents?

    struct Contents: Codable {
        var privateKeyPEM: String
        var credentials: DeviceCredentials?
    }

    public init(path: String) {
        self.path = path
    }

    public func signingKey() async throws -> ES256PrivateKey {
        try ES256PrivateKey(pem: try load().privateKeyPEM)
    }

    public func credentials() async throws -> DeviceCredentials? {
        try load().credentials
    }

    public func save(_ credentials: DeviceCredentials?) async throws {
        var contents = try load()
        contents.credentials = credentials
        try write(contents)
    }

    /// The file's contents; a new key (written at once) when there is no file yet.
    private func load() throws -> Contents {
        if let cached { return cached }
        let contents: Contents
        if let data = FileManager.default.contents(atPath: path) {
            do {
                contents = try JSONDecoder().decode(Contents.self, from: data)
            } catch {
                throw DeviceError.keyStore("\(path) is not a device key file: \(error)")
            }
        } else {
            contents = Contents(privateKeyPEM: ES256PrivateKey().pemRepresentation, credentials: nil)
            try write(contents)
        }
        cached = contents
        return contents
    }

    /// Replaces the file whole: a temporary file, created readable by its owner
    /// only (never wider, not even for a moment), synced, then renamed over it.
    private func write(_ contents: Contents) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        let data = try encoder.encode(contents)
        let temporary = path + ".tmp-\(getpid())"
        unlink(temporary)
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw DeviceError.keyStore("cannot create \(temporary): \(String(cString: strerror(errno)))") }
        let written = data.withUnsafeBytes { Foundation.write(descriptor, $0.baseAddress, $0.count) }
        let synced = fsync(descriptor) == 0
        close(descriptor)
        guard written == data.count, synced, rename(temporary, path) == 0 else {
            let reason = String(cString: strerror(errno))
            unlink(temporary)
            throw DeviceError.keyStore("cannot write \(path): \(reason)")
        }
        cached = contents
    }
}

/// A ``DeviceKeyStore`` in memory: a device that lives as long as the process (tests, demos).
public actor MemoryKeyStore: DeviceKeyStore {
    private let key = ES256PrivateKey()
    private var kept: DeviceCredentials?

    public init() {}

    public func signingKey() async throws -> ES256PrivateKey { key }
    public func credentials() async throws -> DeviceCredentials? { kept }
    public func save(_ credentials: DeviceCredentials?) async throws { kept = credentials }
}

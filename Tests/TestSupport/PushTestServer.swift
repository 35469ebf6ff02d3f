import Foundation

/// A push service on 127.0.0.1 that checks what the daemon sends with other
/// people's code (`scripts/push-test-server.py`): a Web Push endpoint that
/// decrypts with `http_ece` and verifies VAPID with `py_vapid`, or an APNs
/// look-alike over HTTP/2 and TLS (hypercorn) that verifies the provider
/// token against the daemon's key.
public final class PushTestServer: @unchecked Sendable {
    public enum Mode: String, Sendable {
        case webPush = "webpush"
        case apns
    }

    /// One request as the server saw it.
    public struct Received: Decodable, Sendable {
        /// When it arrived, seconds since 1970.
        public var at: Double?
        public var path: String
        public var headers: [String: String]
        public var status: Int
        public var reason: String?
        public var httpVersion: String?
        public var vapid: TokenCheck?
        public var jwt: TokenCheck?
        /// Web Push: the decrypted payload.
        public var payload: [String: String]?
        public var decryptError: String?
        /// APNs: the JSON body as sent.
        public var bodyText: String?

        public var body: [String: Any]? {
            bodyText.flatMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        }
    }

    /// What the server found of a VAPID header or an APNs provider token.
    public struct TokenCheck: Decodable, Sendable {
        public var valid: Bool
        public var error: String?
        public var signature: Bool?
        public var aud: String?
        public var sub: String?
        public var k: String?
        public var token: String?
        public var kid: String?
        public var iss: String?
    }

    public let port: Int
    /// Web Push: the subscription's public key and auth secret (base64url).
    public let p256dh: String?
    public let auth: String?
    /// APNs: the server's self-signed certificate, for `--apns-ca-file`.
    public let caFile: String?
    let folder: URL
    private let process: TiedProcess

    static var script: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("scripts/push-test-server.py").path
    }

    /// Starts a server whose files live under `folder`; APNs needs the daemon's key and its ids.
    public init(_ mode: Mode, folder: URL, apnsKeyFile: String? = nil, keyID: String? = nil, teamID: String? = nil) async throws {
        self.folder = folder.appendingPathComponent("push-\(mode.rawValue)-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: self.folder, withIntermediateDirectories: true)
        let log = self.folder.appendingPathComponent("server.log")
        _ = FileManager.default.createFile(atPath: log.path, contents: nil)
        let logHandle = try FileHandle(forWritingTo: log)
        defer { try? logHandle.close() }
        var arguments = [Self.script, "--mode", mode.rawValue, "--dir", self.folder.path]
        if let apnsKeyFile, let keyID, let teamID { arguments += ["--key", apnsKeyFile, "--key-id", keyID, "--team-id", teamID] }
        process = try TiedProcess(URL(fileURLWithPath: try await TestPython.path()), arguments, output: logHandle)
        let ready = self.folder.appendingPathComponent("ready.json")
        try await waitForReadyFile(
            ready, of: process, log: log,
            failure: "the push test server did not start (see its log)")
        struct Ready: Decodable {
            var port: Int
            var p256dh: String?
            var auth: String?
            var ca: String?
        }
        let info = try JSONDecoder().decode(Ready.self, from: Data(contentsOf: ready))
        port = info.port
        p256dh = info.p256dh
        auth = info.auth
        caFile = info.ca
    }

    public var base: String { "\(caFile == nil ? "http" : "https")://127.0.0.1:\(port)" }

    /// The requests received so far, oldest first.
    public func received() throws -> [Received] {
        let names = try FileManager.default.contentsOfDirectory(atPath: folder.path).filter { $0.hasSuffix(".json") && $0 != "ready.json" }
        return try names.sorted().map { try JSONDecoder().decode(Received.self, from: Data(contentsOf: folder.appendingPathComponent($0))) }
    }

    /// Waits until `done` holds for the requests received (or `timeout` passed: a hang detector); returns them.
    public func wait(timeout: Duration = .seconds(60), until done: ([Received]) -> Bool) async throws -> [Received] {
        let clock = ContinuousClock()
        let start = clock.now
        while true {
            let all = try received()
            if done(all) || clock.now - start > timeout { return all }
            try await Task.sleep(for: .milliseconds(50))
        }
    }

    public func stop() { process.stop() }

    deinit { stop() }
}

/// Waits until a test server started as `process` writes `ready` (it listens);
/// one that exits first, or takes over 30 s, is stopped and `failure` thrown
/// with what it wrote to `log`.
public func waitForReadyFile(_ ready: URL, of process: TiedProcess, log: URL, failure: String) async throws {
    let clock = ContinuousClock()
    let start = clock.now
    while !FileManager.default.fileExists(atPath: ready.path) {
        guard process.isRunning, clock.now - start < .seconds(30) else {
            process.stop()
            let said = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
            throw RunError("\(failure): \(said)")
        }
        try await Task.sleep(for: .milliseconds(50))
    }
}

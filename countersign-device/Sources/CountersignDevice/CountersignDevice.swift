import CountersignWire
import Crypto
import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The phone's side of Countersign, for app developers: sign in (or enroll
/// with an integration's code), list what waits for an answer, answer it
/// signed with the device's P-256 key (a fraud report included), show the
/// offline code when there is no network, and read the daemon's push notices.
///
/// The identity lives in a ``DeviceKeyStore``: a device made once keeps its key,
/// API key and offline secret across runs. Its answers are signed by the store's
/// ``DeviceSigner``, which may keep its key where the library cannot read it.
///
/// ```swift
/// let device = CountersignDevice(baseURL: "https://auth.example.com", store: FileKeyStore(path: "device.json"))
/// if try await device.credentials() == nil {
///     try await device.signIn(email: "ana@example.com", password: password, name: "Ana's phone", platform: "ios")
/// }
/// for approval in try await device.waitForPending(timeout: .seconds(30)) {
///     try await device.answer(approval.requestId, .approve, numberCode: typedNumber)
/// }
/// ```
public actor CountersignDevice {
    /// One HTTP exchange: method, URL, JSON body, API key → status and body.
    public typealias Transport =
        @Sendable (_ method: String, _ url: String, _ body: Data?, _ apiKey: String?) async throws -> (status: Int, body: Data)

    /// The daemon's address, without a trailing `/`.
    public nonisolated let baseURL: String
    private let store: any DeviceKeyStore
    private let transport: Transport

    /// - Parameters:
    ///   - baseURL: where the daemon answers, e.g. `https://auth.example.com`.
    ///   - store: where the key and credentials are kept.
    ///   - transport: how calls go out; by default URLSession's shared session (``urlSession(_:timeout:)``).
    public init(baseURL: String, store: any DeviceKeyStore, transport: Transport? = nil) {
        var base = baseURL
        while base.hasSuffix("/") { base.removeLast() }
        self.baseURL = base
        self.store = store
        self.transport = transport ?? Self.urlSession()
    }

    /// The most an answer of the daemon may hold; a longer one is refused as it arrives.
    public static let maximumAnswerBytes = 1 << 20

    /// Calls through a URLSession of their own: ephemeral (no cookies, no cache on disk), following
    /// no redirect (the API key and a password never go to another address), reading at most
    /// ``maximumAnswerBytes`` of an answer, each call bounded by `timeout` seconds in all.
    public static func urlSession(timeout: TimeInterval = 40) -> Transport {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.urlCache = nil
        configuration.httpCookieStorage = nil
        configuration.httpShouldSetCookies = false
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        configuration.timeoutIntervalForRequest = timeout
        configuration.timeoutIntervalForResource = timeout
        let exchanges = Exchanges(limit: maximumAnswerBytes)
        let session = URLSession(configuration: configuration, delegate: exchanges, delegateQueue: nil)
        return { method, url, body, apiKey in
            guard let address = URL(string: url) else { throw DeviceError.unexpectedAnswer("\(method): not a URL") }
            var request = URLRequest(url: address, timeoutInterval: timeout)
            request.httpMethod = method
            if let apiKey { request.setValue(apiKey, forHTTPHeaderField: "X-API-Key") }
            if let body {
                request.setValue("application/json", forHTTPHeaderField: "Content-Type")
                request.httpBody = body
            }
            let (data, response) = try await exchanges.run(request, in: session)
            guard let http = response as? HTTPURLResponse else { throw DeviceError.unexpectedAnswer("\(method): not an HTTP answer") }
            return (http.statusCode, data)
        }
    }

    /// The calls of one session: each answer collected up to `limit` bytes (a longer one is
    /// cancelled as it arrives), and every redirect refused (the 3xx is the answer).
    private final class Exchanges: NSObject, URLSessionDataDelegate, @unchecked Sendable {
        private struct Exchange {
            var data = Data()
            var response: URLResponse?
            var tooLong = false
            let continuation: CheckedContinuation<(Data, URLResponse), any Error>
        }

        private let limit: Int
        // Guards `open`; the session calls the delegate on its own queue.
        private let lock = NSLock()
        private var open: [Int: Exchange] = [:]

        init(limit: Int) {
            self.limit = limit
        }

        func run(_ request: URLRequest, in session: URLSession) async throws -> (Data, URLResponse) {
            let task = session.dataTask(with: request)
            return try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { continuation in
                    locked { open[task.taskIdentifier] = Exchange(continuation: continuation) }
                    task.resume()
                }
            } onCancel: {
                task.cancel()
            }
        }

        private func locked<T>(_ body: () throws -> T) rethrows -> T {
            lock.lock()
            defer { lock.unlock() }
            return try body()
        }

        func urlSession(
            _ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
            completionHandler: @escaping @Sendable (URLSession.ResponseDisposition) -> Void
        ) {
            let tooLong = response.expectedContentLength > Int64(limit)
            locked {
                open[dataTask.taskIdentifier]?.response = response
                if tooLong { open[dataTask.taskIdentifier]?.tooLong = true }
            }
            completionHandler(tooLong ? .cancel : .allow)
        }

        func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
            // Once too long, stays too long: nothing more is kept (a platform that goes on delivering after the cancel).
            let tooLong = locked {
                guard var exchange = open[dataTask.taskIdentifier], !exchange.tooLong else { return true }
                exchange.data.append(data)
                if exchange.data.count > limit {
                    exchange.tooLong = true
                    exchange.data = Data()
                }
                open[dataTask.taskIdentifier] = exchange
                return exchange.tooLong
            }
            if tooLong { dataTask.cancel() }
        }

        func urlSession(
            _ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse, newRequest request: URLRequest,
            completionHandler: @escaping @Sendable (URLRequest?) -> Void
        ) {
            completionHandler(nil)
        }

        func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
            guard let exchange = locked({ open.removeValue(forKey: task.taskIdentifier) }) else { return }
            if exchange.tooLong {
                exchange.continuation.resume(throwing: DeviceError.unexpectedAnswer("an answer of more than \(limit) bytes"))
            } else if let error {
                exchange.continuation.resume(throwing: error)
            } else if let response = exchange.response {
                exchange.continuation.resume(returning: (exchange.data, response))
            } else {
                exchange.continuation.resume(throwing: DeviceError.unexpectedAnswer("no answer"))
            }
        }
    }

    // MARK: Identity

    /// The credentials kept for this daemon; `nil` when the device has not signed in to it.
    public func credentials() async throws -> DeviceCredentials? {
        guard let credentials = try await store.credentials(), credentials.baseURL == baseURL else { return nil }
        return credentials
    }

    /// Signs in with the user's password: the device becomes a trusted device
    /// of the user, bound to its key, and may answer password resets.
    @discardableResult
    /// `push` says where its pushes go (any provider); `pushToken` is the older form, an FCM token.
    public func signIn(
        email: String, password: String, name: String, platform: String, pushToken: String? = nil, push: PushRegistration? = nil
    ) async throws
        -> DeviceCredentials
    {
        var body: [String: any Sendable] = [
            "email": email, "password": password, "deviceName": name, "platform": platform, "publicKey": try await publicKey(),
            "sealKey": try await sealKey(),
        ]
        if let pushToken { body["fcmToken"] = pushToken }
        if let push { body["push"] = push.json }
        return try await register("/api/mobile/auth/login", body)
    }

    /// Enrolls with the one-time code a relying service issued (no password):
    /// the device answers that user's approvals, not a password reset.
    @discardableResult
    public func enroll(
        code: String, name: String, platform: String, pushToken: String? = nil, push: PushRegistration? = nil
    ) async throws -> DeviceCredentials {
        var body: [String: any Sendable] = [
            "enrollmentCode": code, "deviceName": name, "platform": platform, "publicKey": try await publicKey(),
            "sealKey": try await sealKey(),
        ]
        if let pushToken { body["fcmToken"] = pushToken }
        if let push { body["push"] = push.json }
        return try await register("/api/mobile/auth/enroll", body)
    }

    /// Signs out: the daemon forgets the device and the store its credentials (the key stays).
    /// A device the daemon no longer knows (revoked, or its key refreshed elsewhere) is forgotten all the same.
    public func signOut() async throws {
        do {
            _ = try await call("DELETE", "/api/mobile/device", nil, as: Empty.self)
        } catch DeviceError.refused(let status, _, _) where status == 401 {
            // Already gone on the daemon's side.
        }
        try await store.save(nil)
    }

    /// Gives the password again for a new API key (the old one stops at once)
    /// and a new offline secret; the device may answer password resets from
    /// now on, also if an integration enrolled it.
    @discardableResult
    public func refreshKey(password: String) async throws -> DeviceCredentials {
        guard var credentials = try await credentials() else { throw DeviceError.notSignedIn }
        let answer = try await call("POST", "/api/mobile/auth/refresh-key", ["password": password], as: Refreshed.self)
        credentials.apiKey = answer.apiKey
        credentials.offlineSecret = answer.offline?.secret
        try await store.save(credentials)
        return credentials
    }

    /// Binds the device's answers to `newSigner`'s key instead of the store's: the new
    /// key proves itself, and the current one (if the device has one) signs that it agrees.
    /// The daemon refuses answers signed by the old key from then on. Keep both keys until
    /// this returns, then have the store give `newSigner` (``DeviceKeyStore/signer()``): an
    /// app stopped in between finds out which key the daemon holds by answering with each.
    public func replaceKey(with newSigner: any DeviceSigner) async throws {
        guard let credentials = try await credentials() else { throw DeviceError.notSignedIn }
        let claims = CompactJWS.Proof(deviceId: credentials.deviceID, iat: Int(Date().timeIntervalSince1970))
        var body: [String: any Sendable] = [
            "publicKey": try await Self.jwk(of: newSigner), "proof": try await CompactJWS.sign(claims, type: "JWT", with: newSigner),
        ]
        if credentials.keyBound {
            body["previousProof"] = try await CompactJWS.sign(claims, type: "JWT", with: try await store.signer())
        }
        _ = try await call("PUT", "/api/mobile/device/public-key", body, as: Empty.self)
        var bound = credentials
        bound.keyBound = true
        try await store.save(bound)
    }

    /// Tells the daemon the device's current push token (FCM rotates them); `nil` or empty: pull only.
    public func updatePushToken(_ token: String?) async throws {
        _ = try await call("PUT", "/api/mobile/device/fcm-token", ["fcmToken": token ?? ""], as: Empty.self)
    }

    /// Tells the daemon where the device's pushes go now: an FCM or APNs token,
    /// or a UnifiedPush / Web Push subscription; `nil`: pull only.
    public func updatePush(_ push: PushRegistration?) async throws {
        var body = (push ?? .fcm(token: "")).json
        body["sealKey"] = try await sealKey()
        _ = try await call("PUT", "/api/mobile/device/push", body, as: Empty.self)
    }

    /// The push providers the daemon sends through and, with Web Push on, the
    /// VAPID key to subscribe the UnifiedPush distributor with.
    public func pushOffer() async throws -> PushOffer {
        try await call("GET", "/api/mobile/push/config", nil, as: PushOffer.self)
    }

    // MARK: Answering

    /// What waits for this device's answer, newest first.
    public func pending() async throws -> [PendingApproval] {
        try await call("GET", "/api/mobile/approvals/pending", nil, as: PendingList.self).approvals
    }

    /// One request of this device's user, with its state (`status`): what to
    /// show when a push names it (``DeviceNotice/approvalRequest(_:)``).
    public func approval(_ requestID: String) async throws -> PendingApproval {
        try await call("GET", "/api/mobile/approvals/\(try Self.pathSegment(requestID))", nil, as: PendingApproval.self)
    }

    /// Waits until something waits for an answer (pull mode: asks every
    /// `interval`), at most `timeout`; an empty list when nothing came.
    public func waitForPending(timeout: Duration, interval: Duration = .seconds(1)) async throws -> [PendingApproval] {
        let deadline = ContinuousClock.now + timeout
        while true {
            let found = try await pending()
            if !found.isEmpty || ContinuousClock.now >= deadline { return found }
            try await Task.sleep(for: min(interval, deadline - ContinuousClock.now))
        }
    }

    /// Answers request `requestID`, signed with the device's key: `numberCode`
    /// when number matching is on and the answer approves; `reportFraud` with a
    /// denial says "this was not me" (the report is part of what is signed).
    /// Returns the request's state after the answer (`approved` or `denied`).
    @discardableResult
    public func answer(
        _ requestID: String, _ decision: Decision, numberCode: String? = nil, reportFraud: Bool = false
    ) async throws
        -> String
    {
        guard let credentials = try await credentials() else { throw DeviceError.notSignedIn }
        var body: [String: any Sendable] = ["decision": decision.rawValue]
        if let numberCode { body["numberCode"] = numberCode }
        if reportFraud { body["reportFraud"] = true }
        if credentials.keyBound {
            let payload = CompactJWS.Answer(
                requestId: requestID, decision: decision.rawValue, numberCode: numberCode, iat: Int(Date().timeIntervalSince1970),
                deviceId: credentials.deviceID, fraud: reportFraud ? true : nil)
            body["signature"] = try await CompactJWS.sign(payload, type: Self.answerType, with: try await store.signer())
        }
        return try await call("POST", "/api/mobile/approvals/\(try Self.pathSegment(requestID))/respond", body, as: Answered.self).status
    }

    /// The offline code the device shows at `date` (RFC 6238: 6 digits, a new
    /// one every 30 s), for the user to type where the requester waits;
    /// `nil` when the daemon gave no offline secret (offline codes off).
    public func offlineCode(at date: Date = Date()) async throws -> String? {
        guard let secret = try await credentials()?.offlineSecret.flatMap(Base32.decode) else { return nil }
        return TOTP.code(secret: secret, step: TOTP.step(at: date))
    }

    // MARK: Calls

    private struct Empty: Decodable {}
    private struct PendingList: Decodable { var approvals: [PendingApproval] }
    private struct Answered: Decodable { var status: String }
    private struct Refreshed: Decodable {
        struct Offline: Decodable { var secret: String }
        var apiKey: String
        var offline: Offline?
    }
    private struct ErrorBody: Decodable {
        var error: String
        var message: String
    }
    private struct Registered: Decodable {
        struct User: Decodable {
            var id: String
            var email: String
        }
        struct Device: Decodable {
            var id: String
            var keyBound: Bool
        }
        struct Offline: Decodable { var secret: String }
        var user: User
        var device: Device
        var apiKey: String
        var offline: Offline?
    }

    /// A request id as a path segment: only what ids are made of (a push is not trusted to name a path).
    private static func pathSegment(_ requestID: String) throws -> String {
        guard !requestID.isEmpty, requestID.utf8.count <= 128,
            requestID.utf8.allSatisfy({
                ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x41 && $0 <= 0x5A) || ($0 >= 0x61 && $0 <= 0x7A) || $0 == 0x2D || $0 == 0x5F
            })
        else { throw DeviceError.unexpectedAnswer("not a request id") }
        return requestID
    }

    /// The `typ` of a signed answer's header.
    static let answerType = "countersign-answer+jwt"

    /// `signer`'s public key as the JWK the daemon takes (`publicKey`).
    private static func jwk(of signer: any DeviceSigner) async throws -> [String: String] {
        let point = try await signer.publicKey().x963Representation.dropFirst()
        return ["kty": "EC", "crv": "P-256", "x": Base64URL.encode(point.prefix(32)), "y": Base64URL.encode(point.suffix(32))]
    }

    private func publicKey() async throws -> [String: String] {
        try await Self.jwk(of: try await store.signer())
    }

    /// The sealing key's public half, as the daemon takes it (`sealKey`).
    private func sealKey() async throws -> String {
        SealKey(publicKey: try await store.sealingKey().publicKey).text
    }

    private func register(_ path: String, _ body: [String: any Sendable]) async throws -> DeviceCredentials {
        let answer = try await call("POST", path, body, as: Registered.self, signedIn: false)
        let credentials = DeviceCredentials(
            baseURL: baseURL, deviceID: answer.device.id, userID: answer.user.id, email: answer.user.email, apiKey: answer.apiKey,
            keyBound: answer.device.keyBound, offlineSecret: answer.offline?.secret)
        try await store.save(credentials)
        return credentials
    }

    private func call<Answer: Decodable>(
        _ method: String, _ path: String, _ body: [String: any Sendable]?, as: Answer.Type, signedIn: Bool = true
    ) async throws -> Answer {
        var apiKey: String?
        if signedIn {
            guard let credentials = try await credentials() else { throw DeviceError.notSignedIn }
            apiKey = credentials.apiKey
        }
        let data = try body.map { try JSONSerialization.data(withJSONObject: $0, options: [.sortedKeys]) }
        let (status, answer) = try await transport(method, baseURL + path, data, apiKey)
        guard (200..<300).contains(status) else {
            let error = try? JSONDecoder().decode(ErrorBody.self, from: answer)
            throw DeviceError.refused(status: status, error: error?.error ?? "http_\(status)", message: error?.message ?? "")
        }
        do {
            return try JSONDecoder().decode(Answer.self, from: answer)
        } catch {
            // The path may hold a request id, the requester's credential: only the method and the error.
            throw DeviceError.unexpectedAnswer("\(method): \(error)")
        }
    }
}

import Foundation
import HTTPTypes
import Hummingbird
import JWTKit
import NIOCore
import Synchronization
import _CryptoExtras

/// A stand-in for Google's OAuth token endpoint and FCM's `messages:send`,
/// strict where the real service is strict: it verifies the RS256 assertion
/// with the public half of a key it generated, checks every claim, and
/// rejects messages the real service would reject. For tests and the
/// benchmark only; it listens on 127.0.0.1.
public final class FakeFCM: Sendable {
    public static let projectID = "countersign-test"
    public static let keyID = "fake-key-0001"
    public static let clientEmail = "push@countersign-test.iam.gserviceaccount.com"
    public static let scope = "https://www.googleapis.com/auth/firebase.messaging"

    /// What a scripted device token answers, in order; the last answer repeats.
    public enum Answer: Sendable, Equatable {
        case ok
        case error(httpStatus: Int, status: String, errorCode: String?, retryAfter: Int? = nil)
        /// A proxy's HTML error page instead of Google's JSON, as a 502 may come back.
        case html(httpStatus: Int)

        public static let unregistered = Answer.error(httpStatus: 404, status: "NOT_FOUND", errorCode: "UNREGISTERED")
        public static let senderMismatch = Answer.error(httpStatus: 403, status: "PERMISSION_DENIED", errorCode: "SENDER_ID_MISMATCH")
        public static let invalidArgument = Answer.error(httpStatus: 400, status: "INVALID_ARGUMENT", errorCode: "INVALID_ARGUMENT")
        public static let thirdPartyAuth = Answer.error(httpStatus: 401, status: "UNAUTHENTICATED", errorCode: "THIRD_PARTY_AUTH_ERROR")
        public static func unavailable(retryAfter: Int?) -> Answer {
            .error(httpStatus: 503, status: "UNAVAILABLE", errorCode: "UNAVAILABLE", retryAfter: retryAfter)
        }
    }

    /// One `messages:send` call the fake accepted as well formed.
    public struct Received: Sendable {
        public let token: String
        public let data: [String: String]
        public let json: String
        public let at: Date
        public let validateOnly: Bool
        public let answeredOK: Bool
    }

    struct State {
        var issued: Set<String> = []
        var exchanges = 0
        var received: [Received] = []
        var rejections: [String] = []
        var scripts: [String: [Answer]] = [:]
        var refuseNextAccessToken = false
        var failingExchanges = 0
        var delivered = 0
        var tokenLifetime = 3599
    }

    public let privateKeyPEM: String
    private let keys: JWTKeyCollection
    private let state = Mutex(State())

    /// One key pair for every fake of this process that does not ask for its own: making an RSA key takes
    /// up to a second in a debug build, and a test suite starts dozens of fakes at once.
    private static let processKey = Result { try _RSA.Signing.PrivateKey(keySize: .bits2048) }

    /// A fake with this process's key pair, or with one of its own (`newKey`: a test that needs two keys).
    public init(newKey: Bool = false) async throws {
        let key = newKey ? try _RSA.Signing.PrivateKey(keySize: .bits2048) : try Self.processKey.get()
        privateKeyPEM = key.pkcs8PEMRepresentation
        keys = JWTKeyCollection()
        await keys.add(
            rsa: try Insecure.RSA.PublicKey(pem: key.publicKey.pemRepresentation), digestAlgorithm: .sha256, kid: JWKIdentifier(string: Self.keyID))
    }

    /// A service-account key file for this fake, with `token_uri` at `base`.
    public func serviceAccountJSON(base: String) throws -> Data {
        try JSONSerialization.data(withJSONObject: [
            "type": "service_account",
            "project_id": Self.projectID,
            "private_key_id": Self.keyID,
            "private_key": privateKeyPEM,
            "client_email": Self.clientEmail,
            "client_id": "1234567890",
            "token_uri": base + "/token",
        ])
    }

    // MARK: What tests look at and script

    public var exchanges: Int { state.withLock { $0.exchanges } }
    public var received: [Received] { state.withLock { $0.received } }
    public var rejections: [String] { state.withLock { $0.rejections } }
    /// Messages answered 200 (not counting validate_only).
    public var delivered: Int { state.withLock { $0.delivered } }

    public func script(_ token: String, _ answers: [Answer]) {
        state.withLock { $0.scripts[token] = answers }
    }

    /// How many seconds the access tokens it issues say they last (`expires_in`).
    public func setTokenLifetime(_ seconds: Int) {
        state.withLock { $0.tokenLifetime = seconds }
    }

    /// The next `count` token exchanges fail with 503, as Google's token endpoint does in an outage.
    public func failTokenExchanges(_ count: Int) {
        state.withLock { $0.failingExchanges = count }
    }

    /// The next send is refused with 401 UNAUTHENTICATED and its access token revoked.
    public func refuseNextAccessToken() {
        state.withLock { $0.refuseNextAccessToken = true }
    }

    // MARK: Server

    public func router() -> Router<BasicRequestContext> {
        let router = Router()
        router.post("token") { request, context in try await self.token(request, context: context) }
        router.post("v1/projects/{project}/messages:send") { request, context in try await self.send(request, context: context) }
        return router
    }

    struct Claims: JWTPayload {
        var iss: IssuerClaim
        var scope: String
        var aud: AudienceClaim
        var iat: IssuedAtClaim
        var exp: ExpirationClaim
        var sub: SubjectClaim?

        func verify(using algorithm: some JWTAlgorithm) async throws {
            try exp.verifyNotExpired()
        }
    }

    func token(_ request: Request, context: BasicRequestContext) async throws -> Response {
        let body = String(buffer: try await request.body.collect(upTo: 64 * 1024))
        guard request.headers[.contentType]?.hasPrefix("application/x-www-form-urlencoded") == true else {
            return oauthError("invalid_request", "content type must be application/x-www-form-urlencoded")
        }
        var form: [String: String] = [:]
        for pair in body.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1).map { String($0).removingPercentEncoding ?? "" }
            if parts.count == 2 { form[parts[0]] = parts[1] }
        }
        guard form["grant_type"] == "urn:ietf:params:oauth:grant-type:jwt-bearer", let assertion = form["assertion"] else {
            return oauthError("unsupported_grant_type", "grant_type must be jwt-bearer with an assertion")
        }
        if let problem = await check(assertion: assertion, audience: "http\(isTLS(request) ? "s" : "")://\(request.head.authority ?? "")/token") {
            return oauthError("invalid_grant", problem)
        }
        let outage = state.withLock { state in
            guard state.failingExchanges > 0 else { return false }
            state.failingExchanges -= 1
            return true
        }
        if outage {
            return json(.serviceUnavailable, ["error": "temporarily_unavailable", "error_description": "try again later"])
        }
        let token = "ya29.fake-" + UUID().uuidString
        let lifetime = state.withLock { state in
            state.issued.insert(token)
            state.exchanges += 1
            return state.tokenLifetime
        }
        return json(.ok, ["access_token": token, "expires_in": lifetime, "token_type": "Bearer"])
    }

    func isTLS(_ request: Request) -> Bool { request.head.scheme == "https" }

    /// Every check Google makes of the assertion; a sentence naming the first failure.
    func check(assertion: String, audience: String) async -> String? {
        let parts = assertion.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let headerData = Data(base64URL: String(parts[0])), let payloadData = Data(base64URL: String(parts[1])),
            let header = try? JSONSerialization.jsonObject(with: headerData) as? [String: Any],
            let payloadText = String(data: payloadData, encoding: .utf8)
        else { return "malformed assertion" }
        guard header["alg"] as? String == "RS256" else { return "alg must be RS256" }
        guard header["typ"] as? String == "JWT" else { return "typ must be JWT" }
        guard header["kid"] as? String == Self.keyID else { return "kid must be the key id" }
        for claim in ["iat", "exp"] where payloadText.range(of: "\"\(claim)\":[0-9]+[,}]", options: .regularExpression) == nil {
            return "\(claim) must be integer seconds"
        }
        let claims: Claims
        do {
            claims = try await keys.verify(assertion, as: Claims.self)
        } catch {
            return "signature or expiry check failed: \(error)"
        }
        guard claims.sub == nil else { return "sub must be absent" }
        guard claims.iss.value == Self.clientEmail else { return "iss must be the client email" }
        guard claims.scope == Self.scope else { return "scope must be firebase.messaging" }
        guard claims.aud.value == [audience] else { return "aud must be the token URI \(audience), was \(claims.aud.value)" }
        let iat = claims.iat.value.timeIntervalSince1970
        guard abs(iat - Date().timeIntervalSince1970) < 60 else { return "iat must be now" }
        guard claims.exp.value.timeIntervalSince1970 - iat == 3600 else { return "exp must be iat + 3600" }
        return nil
    }

    func send(_ request: Request, context: BasicRequestContext) async throws -> Response {
        let project = context.parameters.get("project")
        let bytes = try await request.body.collect(upTo: 1 << 20)
        let authorization = request.headers[.authorization] ?? ""
        let accessToken = authorization.hasPrefix("Bearer ") ? String(authorization.dropFirst(7)) : ""
        let refuse = state.withLock { state -> Bool in
            guard state.issued.contains(accessToken) else { return true }
            if state.refuseNextAccessToken {
                state.refuseNextAccessToken = false
                state.issued.remove(accessToken)
                return true
            }
            return false
        }
        if refuse {
            return fcmError(httpStatus: 401, status: "UNAUTHENTICATED", errorCode: nil, message: "Request had invalid authentication credentials.")
        }
        guard project == Self.projectID else {
            return fcmError(
                httpStatus: 404, status: "NOT_FOUND", errorCode: nil, message: "Requested entity was not found (unknown project \(project ?? "")).")
        }
        guard request.headers[.contentType]?.hasPrefix("application/json") == true else {
            return reject(400, "content type must be application/json")
        }
        guard bytes.readableBytes <= 4096 + 64 else { return reject(400, "message larger than 4096 bytes") }
        let text = String(buffer: bytes)
        guard let body = try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any],
            let message = body["message"] as? [String: Any]
        else {
            return reject(400, "body must be {\"message\": {...}}")
        }
        if let problem = Self.problems(in: message) { return reject(400, problem) }
        let token = message["token"] as! String
        let validateOnly = body["validate_only"] as? Bool ?? false
        let answer = state.withLock { state -> Answer in
            guard var answers = state.scripts[token], !answers.isEmpty else { return .ok }
            let next = answers.removeFirst()
            if !answers.isEmpty { state.scripts[token] = answers }
            return next
        }
        state.withLock {
            $0.received.append(
                Received(
                    token: token, data: message["data"] as? [String: String] ?? [:], json: text, at: Date(), validateOnly: validateOnly,
                    answeredOK: answer == .ok))
            if answer == .ok && !validateOnly { $0.delivered += 1 }
        }
        switch answer {
        case .ok:
            return json(.ok, ["name": "projects/\(Self.projectID)/messages/\(UUID().uuidString)"])
        case .error(let httpStatus, let status, let errorCode, let retryAfter):
            var response = fcmError(httpStatus: httpStatus, status: status, errorCode: errorCode, message: "scripted \(status)")
            if let retryAfter { response.headers[.retryAfter] = String(retryAfter) }
            return response
        case .html(let httpStatus):
            let page = "<html><head><title>\(httpStatus) Error</title></head><body><h1>The server could not answer</h1></body></html>"
            return Response(
                status: HTTPResponse.Status(code: httpStatus), headers: [.contentType: "text/html; charset=UTF-8"],
                body: .init(byteBuffer: ByteBuffer(string: page)))
        }
    }

    /// What the real service would refuse in a message; `nil` when it is acceptable.
    public static func problems(in message: [String: Any]) -> String? {
        let targets = ["token", "topic", "condition"].filter { message[$0] != nil }
        guard targets == ["token"], let token = message["token"] as? String, !token.isEmpty else {
            return "exactly one target, a token, is required"
        }
        if let data = message["data"] {
            guard let map = data as? [String: Any] else { return "data must be a map" }
            for (key, value) in map {
                guard value is String, !(value is NSNumber) else { return "data value of \(key) is not a string" }
                if ["from", "message_type"].contains(key) || key.hasPrefix("google.") || key.hasPrefix("gcm.") {
                    return "data key \(key) is reserved"
                }
            }
        }
        if let android = message["android"] as? [String: Any] {
            if let priority = android["priority"] {
                guard let text = priority as? String, ["high", "normal"].contains(text) else { return "android.priority must be high or normal" }
            }
            if let ttl = android["ttl"] {
                guard let text = ttl as? String, text.range(of: #"^[0-9]+(\.[0-9]{1,9})?s$"#, options: .regularExpression) != nil else {
                    return "android.ttl must be a duration such as \"60s\""
                }
            }
        }
        if let apns = message["apns"] as? [String: Any] {
            if let headers = apns["headers"] {
                guard let map = headers as? [String: Any], map.values.allSatisfy({ $0 is String && !($0 is NSNumber) }) else {
                    return "apns.headers values must be strings"
                }
                if let expiration = map["apns-expiration"] as? String, Int(expiration) == nil { return "apns-expiration must be unix seconds" }
                if let priority = map["apns-priority"] as? String, !["5", "10"].contains(priority) { return "apns-priority must be 5 or 10" }
                if let collapse = map["apns-collapse-id"] as? String, collapse.utf8.count > 64 { return "apns-collapse-id longer than 64 bytes" }
            }
        }
        return nil
    }

    func reject(_ httpStatus: Int, _ reason: String) -> Response {
        state.withLock { $0.rejections.append(reason) }
        return fcmError(httpStatus: httpStatus, status: "INVALID_ARGUMENT", errorCode: "INVALID_ARGUMENT", message: reason)
    }

    func fcmError(httpStatus: Int, status: String, errorCode: String?, message: String) -> Response {
        var error: [String: Any] = ["code": httpStatus, "message": message, "status": status]
        if let errorCode {
            error["details"] = [["@type": "type.googleapis.com/google.firebase.fcm.v1.FcmError", "errorCode": errorCode]]
        }
        return json(HTTPResponse.Status(code: httpStatus), ["error": error])
    }

    func oauthError(_ code: String, _ description: String) -> Response {
        state.withLock { $0.rejections.append("token: \(description)") }
        return json(.badRequest, ["error": code, "error_description": description])
    }

    func json(_ status: HTTPResponse.Status, _ object: [String: Any]) -> Response {
        let data = (try? JSONSerialization.data(withJSONObject: object)) ?? Data()
        return Response(status: status, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }
}

extension Data {
    init?(base64URL: String) {
        var text = base64URL.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while text.count % 4 != 0 { text += "=" }
        self.init(base64Encoded: text)
    }
}

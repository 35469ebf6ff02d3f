import AsyncHTTPClient
import CountersignCore
import Foundation
import JWTKit
import Logging
import NIOCore
import NIOHTTP1
import Synchronization

/// Sends push messages straight to APNs with a token-based provider key
/// (`.p8`): `POST /3/device/<token>` over HTTP/2, one pooled connection per
/// host (production or sandbox, by the device's environment), sharing the
/// retry loop of every provider (``PushDelivery``).
public final class APNsSender: PushSender {
    /// The sender's own parameters (where it sends, attempts, timeouts),
    /// made by ``PushSetup`` from what the operator configured (``APNsConfiguration``).
    public struct Configuration: Sendable {
        public var productionURL = "https://api.push.apple.com"
        public var sandboxURL = "https://api.sandbox.push.apple.com"
        public var maxAttempts = 5
        public var baseBackoff: TimeInterval = 0.5
        public var requestTimeout: TimeInterval = 10
        /// Whether messages are sealed to the devices' sealing keys (``SealedMessages``).
        public var sealedPush = SealedPushPolicy.optional

        public init() {}

        /// Both environments at one address (`--apns-url`, for tests).
        public init(url: String) {
            let base = url.hasSuffix("/") ? String(url.dropLast()) : url
            productionURL = base
            sandboxURL = base
        }
    }

    public let tokens: APNsProviderToken
    private let client: HTTPClient
    private let configuration: Configuration
    private let delivery: PushDelivery

    public init(tokens: APNsProviderToken, client: HTTPClient, configuration: Configuration, deadTokens: (any PushTokenStore)?) {
        self.tokens = tokens
        self.client = client
        self.configuration = configuration
        self.delivery = PushDelivery(
            service: "APNs", maxAttempts: configuration.maxAttempts, baseBackoff: configuration.baseBackoff, deadTokens: deadTokens)
    }

    public var health: PushHealth { delivery.record.health }
    public var providerHealth: [PushProvider: PushHealth] { [.apns: health] }
    public var offer: PushOffer { PushOffer(providers: [.apns]) }

    public func send(_ job: PushJob, to device: Device, logger: Logger) async -> PushOutcome {
        guard let address = device.push, address.provider == .apns, let topic = address.apnsTopic else { return .rejected }
        return await delivery.send(job, to: device, token: address.token, logger: logger) {
            let seal: ProviderMessages.Seal? =
                SealedMessages.applies(to: device, policy: configuration.sealedPush) ? .init(key: device.sealKey) : nil
            // Too late for a prompt, or no sealed form fits APNs' limit: not sent.
            guard let message = (try? ProviderMessages.apns(for: job, topic: topic, now: Date(), seal: seal)) ?? nil else {
                throw PushRefusal.unsendable(job)
            }
            try await post(message, token: address.token, environment: address.apnsEnvironment ?? .production)
        }
    }

    /// One `POST /3/device/<token>`; throws ``PushRefusal`` on any refusal.
    func post(_ message: ProviderMessages.APNs, token: String, environment: PushAddress.APNsEnvironment) async throws {
        let base = environment == .sandbox ? configuration.sandboxURL : configuration.productionURL
        let providerToken = try await tokens.token()
        var request = HTTPClientRequest(url: "\(base)/3/device/\(token)")
        request.method = .POST
        request.headers.add(name: "authorization", value: "bearer \(providerToken)")
        for header in message.headers { request.headers.add(name: header.name, value: header.value) }
        request.headers.add(name: "content-type", value: "application/json")
        request.body = .bytes(ByteBuffer(bytes: message.body))
        let response = try await client.execute(request, timeout: .seconds(Int64(configuration.requestTimeout)))
        let answer = try await response.body.prefix(1024)
        guard response.status == .ok else {
            let refusal = Self.classify(
                status: Int(response.status.code), body: answer,
                retryAfter: FCMFailure.retryAfter(response.headers.first(name: "retry-after"), now: Date()))
            if refusal.kind == .staleCredential { await tokens.invalidate(providerToken) }
            throw refusal
        }
    }

    /// Sends a silent notice for app `topic` to a device token that cannot
    /// exist (64 zeros), for `push check`: APNs answers 400 `BadDeviceToken`
    /// only once it has accepted the provider token (403 when not). Nothing is
    /// delivered. Any other answer throws.
    public func checkCredentials(topic: String) async throws {
        let body = Data(#"{"aps":{"content-available":1}}"#.utf8)
        let message = ProviderMessages.APNs(
            headers: [("apns-topic", topic), ("apns-push-type", "background"), ("apns-priority", "5")], body: body)
        do {
            try await post(message, token: String(repeating: "0", count: 64), environment: .production)
        } catch let refusal as PushRefusal where refusal.reason == "BadDeviceToken" {
            return
        }
        throw PushRefusal(.rejected, reason: "unexpected", detail: "APNs accepted a push to a device token that cannot exist")
    }

    /// Sorts an APNs error answer (`{"reason": "…"}`) as the contract says.
    static func classify(status: Int, body: Data, retryAfter: TimeInterval?) -> PushRefusal {
        let reason = ((try? JSONSerialization.jsonObject(with: body) as? [String: Any])?["reason"] as? String).map { String($0.prefix(64)) }
        let word = reason ?? "http_\(status)"
        switch (status, reason) {
        case (410, _), (400, "BadDeviceToken"), (400, "Unregistered"):
            return PushRefusal(.tokenDead, reason: word)
        case (403, "ExpiredProviderToken"):
            return PushRefusal(.staleCredential, reason: word, hint: "check the host's clock")
        case (403, _):
            return PushRefusal(
                .authFault, reason: word,
                hint: "check --apns-key-file, --apns-key-id and --apns-team-id against the key in the Apple developer account")
        case (404, _):
            return PushRefusal(.misconfigured, reason: word, hint: "check --apns-url")
        case (429, _), (500...599, _):
            return PushRefusal(.retryable, reason: word, retryAfter: retryAfter)
        default:
            return PushRefusal(.rejected, reason: word)
        }
    }
}

/// The APNs provider token: an ES256 JWT `{"iss": team, "iat": now}` with the
/// key's id as `kid`, reused for 40 minutes (APNs wants a new one every 20 to
/// 60), with one signing in flight however many sends wait.
public actor APNsProviderToken {
    /// How long a token is used before a new one is signed.
    static let lifetime: TimeInterval = 40 * 60

    struct Claims: JWTPayload {
        var iss: IssuerClaim
        var iat: IssuedAtClaim

        func verify(using algorithm: some JWTAlgorithm) async throws {}
    }

    struct Token: Sendable {
        var value: String
        var issuedAt: Date
    }

    private let keys: JWTKeyCollection
    private let keyID: String
    private let teamID: String
    private let now: @Sendable () -> Date
    private let current = Mutex<Token?>(nil)
    private var signing: Task<Token, any Error>?
    /// Tokens signed so far (for tests).
    public private(set) var signed = 0

    /// `pem`: the `.p8` file's contents (an EC P-256 private key).
    public init(pem: String, keyID: String, teamID: String, now: @escaping @Sendable () -> Date = { Date() }) async throws(APNsKeyError) {
        let key: ES256PrivateKey
        do {
            key = try ES256PrivateKey(pem: pem)
        } catch {
            throw APNsKeyError("the APNs key is not an EC P-256 private key in PEM form (.p8)")
        }
        self.keyID = keyID
        self.teamID = teamID
        self.now = now
        // Whole seconds: APNs reads iat as an integer.
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .integerSecondsSince1970
        let keys = JWTKeyCollection()
        await keys.add(ecdsa: key, kid: JWKIdentifier(string: keyID), serializer: DefaultJWTSerializer(jsonEncoder: encoder))
        self.keys = keys
    }

    /// A token younger than ``lifetime``, signing a new one when needed.
    public nonisolated func token() async throws -> String {
        if let token = current.withLock({ $0 }), now().timeIntervalSince(token.issuedAt) < Self.lifetime { return token.value }
        return try await fresh()
    }

    private func fresh() async throws -> String {
        if let token = current.withLock({ $0 }), now().timeIntervalSince(token.issuedAt) < Self.lifetime { return token.value }
        if let signing { return try await signing.value.value }
        let task = Task { try await self.sign() }
        signing = task
        defer { signing = nil }
        let token = try await task.value
        current.withLock { $0 = token }
        return token.value
    }

    private func sign() async throws -> Token {
        signed += 1
        let issued = Date(timeIntervalSince1970: now().timeIntervalSince1970.rounded(.down))
        let value = try await keys.sign(Claims(iss: IssuerClaim(value: teamID), iat: IssuedAtClaim(value: issued)), kid: JWKIdentifier(string: keyID))
        return Token(value: value, issuedAt: issued)
    }

    /// Forgets `token` after APNs called it expired, so the next send signs a new one.
    public func invalidate(_ token: String) {
        current.withLock { if $0?.value == token { $0 = nil } }
    }
}

public struct APNsKeyError: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}

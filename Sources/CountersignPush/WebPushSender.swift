import AsyncHTTPClient
import CountersignCore
import CountersignOutbound
import Crypto
import Foundation
import JWTKit
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization

/// Sends push messages to Web Push subscriptions (RFC 8030), as UnifiedPush
/// distributors (ntfy, NextPush, …) and browsers take them: the payload
/// encrypted for the subscription (RFC 8291, ``WebPushEncryption``), the
/// daemon identified by its VAPID key (RFC 8292).
public final class WebPushSender: PushSender {
    /// The sender's own parameters (where it sends, attempts, timeouts),
    /// made by ``PushSetup`` from what the operator configured (``WebPushConfiguration``).
    public struct Configuration: Sendable {
        public var maxAttempts = 5
        public var baseBackoff: TimeInterval = 0.5
        public var requestTimeout: TimeInterval = 10
        public var endpoints = PushEndpointPolicy()

        public init(endpoints: PushEndpointPolicy = PushEndpointPolicy()) {
            self.endpoints = endpoints
        }
    }

    public let vapid: VAPIDSigner
    /// One client per endpoint host, connecting only to an address it checked.
    private let clients: CheckedHTTPClients
    private let configuration: Configuration
    private let delivery: PushDelivery

    public init(vapid: VAPIDSigner, clients: CheckedHTTPClients, configuration: Configuration, deadTokens: (any PushTokenStore)?) {
        self.vapid = vapid
        self.clients = clients
        self.configuration = configuration
        self.delivery = PushDelivery(
            service: "Web Push", maxAttempts: configuration.maxAttempts, baseBackoff: configuration.baseBackoff, deadTokens: deadTokens)
    }

    public var health: PushHealth { delivery.record.health }
    public var providerHealth: [PushProvider: PushHealth] { [.webPush: health] }
    public var offer: PushOffer { PushOffer(providers: [.webPush], vapidPublicKey: vapid.publicKey) }

    public func send(_ job: PushJob, to device: Device, logger: Logger) async -> PushOutcome {
        guard let address = device.push, address.provider == .webPush, let key = address.webPushKey, let auth = address.webPushAuth else {
            return .rejected
        }
        return await delivery.send(job, to: device, token: address.token, logger: logger) {
            guard let message = ProviderMessages.webPush(for: job, now: Date()) else { throw PushRefusal.unsendable(job) }
            try await post(message, endpoint: address.token, p256dh: key, auth: auth)
        }
    }

    /// One encrypted POST to the endpoint; throws ``PushRefusal`` on any refusal.
    func post(_ message: ProviderMessages.WebPush, endpoint: String, p256dh: Data, auth: Data) async throws {
        guard let url = URL(string: endpoint), let audience = VAPIDSigner.audience(of: url) else {
            throw PushRefusal(.tokenDead, reason: "bad_endpoint")
        }
        // The host is resolved and every address checked; the client connects to a checked one.
        let client: HTTPClient
        do {
            client = try await clients.client(for: url)
        } catch CheckedHTTPClients.Refusal.noAddress {
            throw PushRefusal(.retryable, reason: "dns", detail: "no address for the endpoint's host")
        } catch CheckedHTTPClients.Refusal.forbidden(let address) {
            throw PushRefusal(
                .tokenDead, reason: "private_address",
                detail: "the endpoint's host resolves to \(address.count == 4 ? "a private IPv4" : "a private IPv6") address")
        }
        let body: Data
        do {
            body = try WebPushEncryption.encrypt(message.payload, p256dh: p256dh, auth: auth)
        } catch {
            throw PushRefusal(.rejected, reason: "encryption", detail: "\(error)")
        }
        var request = HTTPClientRequest(url: endpoint)
        request.method = .POST
        request.headers.add(name: "Authorization", value: try await vapid.authorization(audience: audience))
        request.headers.add(name: "Content-Encoding", value: "aes128gcm")
        request.headers.add(name: "Content-Type", value: "application/octet-stream")
        request.headers.add(name: "TTL", value: String(message.ttl))
        request.headers.add(name: "Urgency", value: message.urgency)
        if let topic = message.topic { request.headers.add(name: "Topic", value: topic) }
        request.body = .bytes(ByteBuffer(bytes: body))
        let response = try await client.execute(request, timeout: .seconds(Int64(configuration.requestTimeout)))
        let answer = try await response.body.prefix(200)
        let status = Int(response.status.code)
        guard !(200...202).contains(status) else { return }
        let detail = String(decoding: answer, as: UTF8.self)
        let retryAfter = FCMFailure.retryAfter(response.headers.first(name: "Retry-After"), now: Date())
        throw Self.classify(status: status, detail: detail, retryAfter: retryAfter)
    }

    /// Sorts a push service's refusal as the contract says.
    static func classify(status: Int, detail: String, retryAfter: TimeInterval?) -> PushRefusal {
        let reason = "http_\(status)"
        switch status {
        case 404, 410: return PushRefusal(.tokenDead, reason: reason)
        case 413: return PushRefusal(.rejected, reason: reason, detail: "payload too large: " + detail)
        // A refusal of our VAPID token by an endpoint the device chose says nothing of
        // our configuration: it is that device's push failing, not `auth_error`.
        case 429, 500...599: return PushRefusal(.retryable, reason: reason, retryAfter: retryAfter)
        default: return PushRefusal(.rejected, reason: reason, detail: detail)
        }
    }
}

/// The daemon's VAPID identity (RFC 8292): an ES256 JWT per push service
/// origin, `{"aud": origin, "exp": now + 12 h, "sub": subject}`, reused for an
/// hour, sent as `vapid t=<jwt>, k=<public key>`.
public final class VAPIDSigner: Sendable {
    struct Claims: JWTPayload {
        var aud: AudienceClaim
        var exp: ExpirationClaim
        var sub: SubjectClaim

        func verify(using algorithm: some JWTAlgorithm) async throws {}
    }

    /// Base64url of the uncompressed public key: the `k` parameter, and the key apps subscribe with.
    public let publicKey: String
    let subject: String
    private let keys: JWTKeyCollection
    private let now: @Sendable () -> Date
    private let cache = Mutex<[String: (value: String, madeAt: Date)]>([:])
    static let reuse: TimeInterval = 3600
    static let validity: TimeInterval = 12 * 3600

    public init(key: P256.Signing.PrivateKey, subject: String, now: @escaping @Sendable () -> Date = { Date() }) async throws {
        publicKey = SecureToken.base64URL(key.publicKey.x963Representation)
        self.subject = subject
        self.now = now
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .integerSecondsSince1970
        let keys = JWTKeyCollection()
        await keys.add(ecdsa: try ES256PrivateKey(backing: key), serializer: DefaultJWTSerializer(jsonEncoder: encoder))
        self.keys = keys
    }

    /// The `Authorization` value for a push service at `audience` (its origin).
    public func authorization(audience: String) async throws -> String {
        let at = now()
        if let cached = cache.withLock({ $0[audience] }), at.timeIntervalSince(cached.madeAt) < Self.reuse {
            return "vapid t=\(cached.value), k=\(publicKey)"
        }
        let issued = Date(timeIntervalSince1970: at.timeIntervalSince1970.rounded(.down))
        let jwt = try await keys.sign(
            Claims(
                aud: AudienceClaim(value: audience), exp: ExpirationClaim(value: issued.addingTimeInterval(Self.validity)),
                sub: SubjectClaim(value: subject)))
        cache.withLock { cache in
            // Bounded: push services are few, but endpoints are the devices' choice.
            if cache.count > 1000 { cache.removeAll() }
            cache[audience] = (jwt, at)
        }
        return "vapid t=\(jwt), k=\(publicKey)"
    }

    /// The origin of an endpoint (`https://push.example.net[:port]`), the JWT's `aud`.
    static func audience(of url: URL) -> String? {
        guard let scheme = url.scheme?.lowercased(), let host = url.host?.lowercased() else { return nil }
        let shownHost = host.contains(":") && !host.hasPrefix("[") ? "[\(host)]" : host
        let defaultPort = scheme == "https" ? 443 : 80
        return url.port.map { $0 == defaultPort ? "\(scheme)://\(shownHost)" : "\(scheme)://\(shownHost):\($0)" } ?? "\(scheme)://\(shownHost)"
    }
}

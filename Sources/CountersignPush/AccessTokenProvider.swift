import AsyncHTTPClient
import Foundation
import JWTKit
import Logging
import NIOCore
import NIOHTTP1
import Synchronization

/// OAuth2 access tokens for FCM from a service account: an RS256 assertion
/// signed with the account's key, exchanged at its `token_uri`, cached and
/// refreshed ahead of expiry, with one exchange in flight however many sends wait.
public actor AccessTokenProvider {
    public static let scope = "https://www.googleapis.com/auth/firebase.messaging"
    /// Refresh this long before the token expires (the Admin SDKs use 3¾ to 5 minutes).
    static let refreshMargin: TimeInterval = 300

    struct Assertion: JWTPayload {
        var iss: IssuerClaim
        var scope: String
        var aud: AudienceClaim
        var iat: IssuedAtClaim
        var exp: ExpirationClaim

        func verify(using algorithm: some JWTAlgorithm) async throws {
            try exp.verifyNotExpired()
        }
    }

    struct Token: Sendable {
        var value: String
        var expiresAt: Date
    }

    private let account: ServiceAccount
    private let client: HTTPClient
    private let keys: JWTKeyCollection
    private let logger: Logger
    /// The token, behind a lock so that ``token()``'s fast path reads it
    /// without a hop onto the actor (every push made one, one per message).
    /// Written only on the actor.
    private let current = Mutex<Token?>(nil)
    private var cached: Token? {
        get { current.withLock { $0 } }
        set { current.withLock { $0 = newValue } }
    }
    private var refreshing: Task<Token, any Error>?
    private let now: @Sendable () -> Date
    private let exchangeTimeout: TimeAmount
    /// Token exchanges made so far (for the benchmark and tests).
    public private(set) var exchanges = 0

    /// `now` is the clock a token's remaining life is read on (the assertion's
    /// own times are always the real ones: the token endpoint checks them).
    /// `exchangeTimeout`: how long one token exchange may take before it fails.
    public init(
        account: ServiceAccount, client: HTTPClient, logger: Logger, now: @escaping @Sendable () -> Date = { Date() },
        exchangeTimeout: TimeAmount = .seconds(15)
    ) async throws {
        self.account = account
        self.now = now
        self.exchangeTimeout = exchangeTimeout
        self.client = client
        self.logger = logger
        let key: Insecure.RSA.PrivateKey
        do {
            key = try Insecure.RSA.PrivateKey(pem: account.privateKeyPEM)
        } catch {
            throw ServiceAccountError("FCM service account: field \"private_key\" is not a usable RSA key")
        }
        // jwt-kit's default encoder writes fractional seconds; the token endpoint wants integers.
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .integerSecondsSince1970
        let keys = JWTKeyCollection()
        await keys.add(
            rsa: key, digestAlgorithm: .sha256, kid: JWKIdentifier(string: account.privateKeyID),
            serializer: DefaultJWTSerializer(jsonEncoder: encoder))
        self.keys = keys
    }

    /// A valid access token, exchanging a new one when none is cached or it
    /// expires within five minutes. When that early refresh fails, the cached
    /// token is still good until it expires: it is used, and the next call tries again.
    public nonisolated func token() async throws -> String {
        if let token = current.withLock({ $0 }), token.expiresAt.timeIntervalSince(now()) > Self.refreshMargin {
            return token.value
        }
        return try await refreshedToken()
    }

    private func refreshedToken() async throws -> String {
        if let cached, cached.expiresAt.timeIntervalSince(now()) > Self.refreshMargin {
            return cached.value
        }
        do {
            if let refreshing {
                return try await refreshing.value.value
            }
            let task = Task { try await self.exchange() }
            refreshing = task
            defer { refreshing = nil }
            let token = try await task.value
            cached = token
            return token.value
        } catch {
            guard let cached, cached.expiresAt.timeIntervalSince(now()) > 0 else { throw error }
            logger.warning(
                "access token refresh failed; using the current token until it expires",
                metadata: ["error": "\(error)", "expiresIn": "\(Int(cached.expiresAt.timeIntervalSince(now())))s"])
            return cached.value
        }
    }

    /// Forgets `token` after FCM refused it, so the next call exchanges a new one.
    public func invalidate(_ token: String) {
        if cached?.value == token { cached = nil }
    }

    private func exchange() async throws -> Token {
        exchanges += 1
        let issued = Date(timeIntervalSince1970: Date().timeIntervalSince1970.rounded(.down))
        let assertion = Assertion(
            iss: IssuerClaim(value: account.clientEmail),
            scope: Self.scope,
            aud: AudienceClaim(value: account.tokenURI),
            iat: IssuedAtClaim(value: issued),
            exp: ExpirationClaim(value: issued.addingTimeInterval(3600))
        )
        let jwt = try await keys.sign(assertion, kid: JWKIdentifier(string: account.privateKeyID))
        var form = URLComponents()
        form.queryItems = [
            URLQueryItem(name: "grant_type", value: "urn:ietf:params:oauth:grant-type:jwt-bearer"),
            URLQueryItem(name: "assertion", value: jwt),
        ]
        var request = HTTPClientRequest(url: account.tokenURI)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/x-www-form-urlencoded")
        request.body = .bytes(ByteBuffer(string: form.percentEncodedQuery ?? ""))
        let response = try await client.execute(request, timeout: exchangeTimeout)
        let body = try await response.body.collect(upTo: 64 * 1024)
        let object = try? JSONSerialization.jsonObject(with: Data(body.readableBytesView)) as? [String: Any]
        guard response.status == .ok, let value = object?["access_token"] as? String,
            let expiresIn = (object?["expires_in"] as? NSNumber)?.doubleValue
        else {
            let reason = (object?["error"] as? String) ?? "HTTP \(response.status.code)"
            logger.error("FCM token exchange refused", metadata: ["status": "\(response.status.code)", "error": "\(reason)"])
            throw FCMFailure(response.status.code >= 500 ? .unavailable : .authentication, httpStatus: Int(response.status.code), message: reason)
        }
        logger.debug("FCM access token obtained", metadata: ["expiresIn": "\(Int(expiresIn))"])
        return Token(value: value, expiresAt: now().addingTimeInterval(expiresIn))
    }
}

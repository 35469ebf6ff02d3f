import CountersignCore

/// A push address as a device sends it: `{"provider": "fcm", "token"}`,
/// `{"provider": "apns", "token", "topic", "environment"}` or
/// `{"provider": "webpush", "endpoint", "p256dh", "auth"}`.
struct PushAddressBody: Decodable, Sendable {
    var provider: String
    var token: String?
    var topic: String?
    var environment: String?
    var endpoint: String?
    var p256dh: String?
    var auth: String?
    /// A `sealKey` member among the address's: in a login's or an enrollment's `push` it is
    /// refused (it goes beside `push`), so that an app that put it there is told, not left
    /// believing its prompts are sealed.
    var hasSealKey = false

    enum CodingKeys: String, CodingKey { case provider, token, topic, environment, endpoint, p256dh, auth, sealKey }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        provider = try container.decode(String.self, forKey: .provider)
        token = try container.decodeIfPresent(String.self, forKey: .token)
        topic = try container.decodeIfPresent(String.self, forKey: .topic)
        environment = try container.decodeIfPresent(String.self, forKey: .environment)
        endpoint = try container.decodeIfPresent(String.self, forKey: .endpoint)
        p256dh = try container.decodeIfPresent(String.self, forKey: .p256dh)
        auth = try container.decodeIfPresent(String.self, forKey: .auth)
        // `null` there says nothing; a value there is a key the sender meant to be used.
        hasSealKey = try container.contains(.sealKey) && !container.decodeNil(forKey: .sealKey)
    }
}

/// `PUT /api/mobile/device/push`'s body: a push address, and beside it the sealing key,
/// changed only when sent (`"sealKey": null` removes it, no `sealKey` keeps it).
struct PushUpdateBody: Decodable, Sendable {
    var address: PushAddressBody
    /// `nil`: not sent; `.some(nil)`: removed; `.some(text)`: set.
    var sealKey: String??

    enum CodingKeys: String, CodingKey { case sealKey }

    init(from decoder: any Decoder) throws {
        address = try PushAddressBody(from: decoder)
        let container = try decoder.container(keyedBy: CodingKeys.self)
        if container.contains(.sealKey) {
            sealKey = .some(try container.decodeNil(forKey: .sealKey) ? nil : try container.decode(String.self, forKey: .sealKey))
        } else {
            sealKey = nil
        }
    }
}

extension Field {
    /// The address a device sent; `nil` for an FCM token that is empty or a
    /// placeholder (a pull-only device). `prefix` names the body member the
    /// address sits in (`push.` in a login), for the error.
    static func pushAddress(_ body: PushAddressBody, prefix: String = "", policy: PushEndpointPolicy) throws -> PushAddress? {
        func required(_ value: String?, _ name: String) throws -> String {
            guard let value else { throw APIError.invalidRequest("The field `\(prefix)\(name)` is required for provider \(body.provider).") }
            return try text(value, prefix + name, maxBytes: PushAddress.maximumTokenBytes)
        }
        do {
            switch PushProvider(rawValue: body.provider) {
            case .fcm:
                // Empty (or "unknown") means pull only, as `fcmToken` always has; absent is a mistake.
                guard let given = body.token else { throw APIError.invalidRequest("The field `\(prefix)token` is required for provider fcm.") }
                let token = try text(given, prefix + "token", maxBytes: PushAddress.maximumTokenBytes, allowEmpty: true)
                return Device.pushToken(from: token).map(PushAddress.fcm)
            case .apns:
                return try PushAddress.checkedAPNs(
                    token: try required(body.token, "token"), topic: try required(body.topic, "topic"), environment: body.environment)
            case .webPush:
                return try PushAddress.checkedWebPush(
                    endpoint: try required(body.endpoint, "endpoint"), p256dh: try required(body.p256dh, "p256dh"),
                    auth: try required(body.auth, "auth"), policy: policy)
            case nil:
                throw APIError.invalidRequest("The field `\(prefix)provider` must be one of fcm, apns, webpush.")
            }
        } catch let problem as PushAddress.Problem {
            throw APIError.invalidRequest("The field `\(prefix)\(problem.field)` \(problem.message).")
        }
    }

    /// A login's or enrollment's push address: `push` when given, else the older `fcmToken`.
    static func pushAddress(push: PushAddressBody?, fcmToken: String?, policy: PushEndpointPolicy) throws -> PushAddress? {
        if let push {
            if push.hasSealKey {
                throw APIError.invalidRequest("The field `push.sealKey` is not read: send `sealKey` beside `push`, not in it.")
            }
            return try pushAddress(push, prefix: "push.", policy: policy)
        }
        let token = try fcmToken.map { try text($0, "fcmToken", maxBytes: PushAddress.maximumTokenBytes, allowEmpty: true) }
        return Device.pushToken(from: token).map(PushAddress.fcm)
    }
}

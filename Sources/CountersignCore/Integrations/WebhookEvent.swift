import Foundation

/// One event an integration's webhook receives: a transition of one of its
/// approvals. Written to the outbox in the transaction of the transition.
public struct WebhookEvent: Codable, Sendable, Equatable {
    public struct Payload: Codable, Sendable, Equatable {
        public var approvalId: String
        public var action: String
        public var user: String
        public var status: String
        public var deviceId: String?
        public var deviceKeyBound: Bool?
        /// `push`, `offline_code` or `bypass_code` once answered; null before, or when no one answered.
        public var via: String?

        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(approvalId, forKey: .approvalId)
            try container.encode(action, forKey: .action)
            try container.encode(user, forKey: .user)
            try container.encode(status, forKey: .status)
            // Always present: null when no device answered.
            try container.encode(deviceId, forKey: .deviceId)
            try container.encode(deviceKeyBound, forKey: .deviceKeyBound)
            try container.encode(via, forKey: .via)
        }

        enum CodingKeys: String, CodingKey { case approvalId, action, user, status, deviceId, deviceKeyBound, via }
    }

    /// `evt_…`: receivers deduplicate by it.
    public var id: String
    /// `approval.approved | denied | expired | cancelled | completed`.
    public var type: String
    /// When the transition happened: Standard Webhooks' envelope field (`type`, `timestamp`, `data`). `nil` in events
    /// queued before it was added.
    public var timestamp: String?
    /// The same time, under the name it had first.
    public var createdAt: String
    public var data: Payload

    /// How long a webhook is retried.
    public static let deliveryWindow: TimeInterval = 24 * 3600

    /// The event of `transition` on `request` (as it is after it), as an
    /// outbox row; `nil` for a request no integration made.
    public static func outboxItem(for request: ApprovalRequest, after transition: Transition) -> OutboxItem? {
        guard let prompt = request.prompt else { return nil }
        let event = WebhookEvent(
            id: "evt_" + SecureToken.generate(byteCount: 16),
            type: "approval." + transition.to.rawValue,
            timestamp: Timestamp.string(transition.at),
            createdAt: Timestamp.string(transition.at),
            data: Payload(
                approvalId: request.id, action: request.action.rawValue, user: prompt.userEmail, status: transition.to.rawValue,
                deviceId: request.respondingDeviceID, deviceKeyBound: request.respondingDeviceID == nil ? nil : (request.deviceKeyBound ?? false),
                via: request.via?.rawValue))
        guard let body = try? encoder.encode(event) else { return nil }
        return OutboxItem(
            id: event.id, kind: .webhook, reference: request.id, userID: request.userID, payload: body, createdAt: transition.at,
            nextAttemptAt: transition.at, deadline: transition.at.addingTimeInterval(deliveryWindow), integrationID: request.integrationID)
    }

    /// The event type of a test event (`POST /v1/webhook/ping`).
    public static let pingType = "webhook.ping"

    /// A test event for `integration`, as an outbox row: the same envelope, `data` naming the integration.
    /// Its reference is the integration's id, so one integration's pings go one at a time.
    public static func ping(for integration: Integration, at now: Date) -> OutboxItem? {
        let id = "evt_" + SecureToken.generate(byteCount: 16)
        let event = Ping(
            id: id, type: pingType, timestamp: Timestamp.string(now), createdAt: Timestamp.string(now),
            data: .init(integration: integration.name, message: "A test event, sent on request; nothing happened."))
        guard let body = try? encoder.encode(event) else { return nil }
        return OutboxItem(
            id: id, kind: .webhook, reference: integration.id, userID: nil, payload: body, createdAt: now, nextAttemptAt: now,
            deadline: now.addingTimeInterval(deliveryWindow), integrationID: integration.id)
    }

    /// What a stored event's envelope says, whichever its type: for the lists of deliveries.
    public struct Envelope: Decodable, Sendable {
        public struct Data: Decodable, Sendable { public var approvalId: String? }
        public var type: String
        public var data: Data

        /// `nil` for a payload that is not an event.
        public init?(_ payload: Foundation.Data) {
            guard let envelope = try? JSONDecoder().decode(Self.self, from: payload) else { return nil }
            self = envelope
        }
    }

    struct Ping: Encodable {
        struct Data: Encodable {
            var integration: String
            var message: String
        }
        var id: String
        var type: String
        var timestamp: String
        var createdAt: String
        var data: Data
    }

    static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }()
}

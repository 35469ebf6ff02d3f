import Logging

/// Delivers one push message to one device.
public protocol PushSender: Sendable {
    func send(_ job: PushJob, to device: Device, logger: Logger) async -> PushOutcome
    /// One job's message to each of `devices` (all of one provider): `settled` is told each device's
    /// outcome, by its index in `devices`, as soon as it is known, and the call returns after the last. By
    /// default each device's send runs on its own; a sender that can put many messages on the wire at once
    /// does so.
    func send(_ job: PushJob, to devices: [Device], logger: Logger, settled: @escaping @Sendable (Int, PushOutcome) -> Void) async
    /// How many of a job's devices of `provider` the dispatcher hands to one call of
    /// ``send(_:to:logger:settled:)``: one (the default) for a sender that gains nothing from more.
    func devicesPerSend(_ provider: PushProvider) -> Int
    /// How push is doing, for `/healthz`.
    var health: PushHealth { get }
    /// Each configured provider's health; `/healthz` shows them one by one
    /// when more than one is configured.
    var providerHealth: [PushProvider: PushHealth] { get }
    /// What a device needs to subscribe: the providers on, and the VAPID key.
    var offer: PushOffer { get }
}

extension PushSender {
    public func devicesPerSend(_ provider: PushProvider) -> Int { 1 }

    public func send(_ job: PushJob, to devices: [Device], logger: Logger, settled: @escaping @Sendable (Int, PushOutcome) -> Void) async {
        await sendEach(job, to: devices, logger: logger, settled: settled)
    }

    /// Each device's message sent on its own, at the same time.
    public func sendEach(
        _ job: PushJob, to devices: [Device], logger: Logger, settled: @escaping @Sendable (Int, PushOutcome) -> Void
    ) async {
        if devices.count == 1 { return settled(0, await send(job, to: devices[0], logger: logger)) }
        await withDiscardingTaskGroup { group in
            for (index, device) in devices.enumerated() {
                group.addTask { settled(index, await send(job, to: device, logger: logger)) }
            }
        }
    }

    public var health: PushHealth { .ok }
    public var providerHealth: [PushProvider: PushHealth] { [:] }
    public var offer: PushOffer { PushOffer(providers: []) }
}

/// The push object of `GET /api/mobile/push/config` and of the login and enroll
/// answers: which providers this daemon sends through and, with Web Push on,
/// the VAPID public key a UnifiedPush distributor is subscribed with.
public struct PushOffer: Sendable, Equatable, Encodable {
    public var providers: [PushProvider]
    /// Base64url of the uncompressed P-256 public key; `nil` with Web Push off.
    public var vapidPublicKey: String?

    public init(providers: [PushProvider], vapidPublicKey: String? = nil) {
        self.providers = providers
        self.vapidPublicKey = vapidPublicKey
    }
}

/// The `push` field of `/healthz`.
public enum PushHealth: String, Sendable {
    /// Push is configured and the last sends went through.
    case ok
    /// Push is not configured.
    case disabled
    /// A push gave up recently and none succeeded since.
    case degraded
    /// The push service refused our credentials, or does not know the project or
    /// endpoint we send to (a 404 naming no token), and nothing succeeded since: both
    /// are the operator's configuration to check, and http-api.md lists only these values.
    case authError = "auth_error"
}

import CountersignCore
import Logging

/// The push port over every configured provider: each device's message goes
/// to the provider its address names; a provider that is not configured
/// sends nothing (`disabled`), as push that is off.
public struct PushRouter: PushSender {
    let senders: [PushProvider: any PushSender]
    private let fallback = LoggingPushSender()

    public init(_ senders: [PushProvider: any PushSender]) {
        self.senders = senders
    }

    public func send(_ job: PushJob, to device: Device, logger: Logger) async -> PushOutcome {
        guard let provider = device.push?.provider, let sender = senders[provider] else {
            return await fallback.send(job, to: device, logger: logger)
        }
        return await sender.send(job, to: device, logger: logger)
    }

    /// The one provider's health, `disabled` with none; with several, the
    /// worst of them (``providerHealth`` tells which).
    public var health: PushHealth {
        let all = senders.values.map(\.health)
        guard !all.isEmpty else { return .disabled }
        for worst in [PushHealth.authError, .degraded] where all.contains(worst) { return worst }
        return .ok
    }

    public var providerHealth: [PushProvider: PushHealth] { senders.mapValues(\.health) }

    public var offer: PushOffer {
        PushOffer(
            providers: senders.keys.sorted(), vapidPublicKey: senders.values.lazy.compactMap { $0.offer.vapidPublicKey }.first)
    }
}

import CountersignCore
import Logging
import Synchronization
import TestSupport

/// Records what would be pushed, to check who is prompted.
final class RecordingPushSender: PushSender {
    private let sent = Mutex<[(job: PushJob, deviceID: String)]>([])

    var deliveries: [(job: PushJob, deviceID: String)] { sent.withLock { $0 } }

    var prompts: [(requestID: String, deviceID: String)] {
        deliveries.compactMap { delivery in
            if case .prompt(let id, _, _, _, _, _) = delivery.job { return (id, delivery.deviceID) }
            return nil
        }
    }

    func send(_ job: PushJob, to device: Device, logger: Logger) async -> PushOutcome {
        sent.withLock { $0.append((job, device.id)) }
        return .sent
    }
}

extension RecordingPushSender {
    /// The prompts once there are `count` of them (the dispatcher sends after the answer);
    /// the bound only turns a hang into a failure.
    func prompts(count: Int) async throws -> [(requestID: String, deviceID: String)] {
        let clock = ContinuousClock()
        let start = clock.now
        while prompts.count < count && clock.now - start < .seconds(60) {
            try await Task.sleep(for: .milliseconds(20))
        }
        return prompts
    }
}

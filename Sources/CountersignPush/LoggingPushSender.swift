import CountersignCore
import Logging

/// The sender used while push is not configured: it only logs what it would send.
public struct LoggingPushSender: PushSender {
    public init() {}

    public var health: PushHealth { .disabled }

    public func send(_ job: PushJob, to device: Device, logger: Logger) async -> PushOutcome {
        logger.debug(
            "push disabled; not sent",
            metadata: ["type": "\(job.type)", "device": "\(device.id)", "push": "\(device.push?.described ?? "none")"]
        )
        return .disabled
    }
}

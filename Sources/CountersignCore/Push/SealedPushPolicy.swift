/// Whether FCM and APNs pushes are sealed to the devices' sealing keys (`--sealed-push`).
public enum SealedPushPolicy: String, Sendable, CaseIterable {
    /// No push is sealed; sealing keys are ignored.
    case off
    /// A device with a sealing key gets sealed pushes; one without gets the readable payload.
    case optional
    /// As `optional`, but a device without a sealing key gets pushes without any user data
    /// (only `type` and `requestId`): its app fetches the rest with its API key.
    case required
}

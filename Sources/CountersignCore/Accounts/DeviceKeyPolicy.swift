/// Whether answers must be signed with a device key (`--device-keys`).
public enum DeviceKeyPolicy: String, Sendable, CaseIterable {
    /// Keys are ignored: every device answers with its API key alone.
    case off
    /// A device with a key must sign its answers; one without answers with its API key (the seed apps).
    case optional
    /// As `optional`, and a device without a key cannot answer (403 `key_required`).
    case required
}

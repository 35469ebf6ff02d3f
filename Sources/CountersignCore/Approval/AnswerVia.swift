/// How an answered request was answered: on the device (``push``, pull mode
/// included), or by a code the requester typed where it waited.
public enum AnswerVia: String, Sendable, Equatable, Codable {
    case push
    /// The TOTP code a trusted device shows without network.
    case offlineCode = "offline_code"
    /// A one-time code the operator issued (`countersign user bypass-codes`).
    case bypassCode = "bypass_code"
}

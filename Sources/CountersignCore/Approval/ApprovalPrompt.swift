/// What an integration asked its user to approve: the text the phone shows,
/// and whose approval it is. Requests of the phone reset have none.
public struct ApprovalPrompt: Sendable, Equatable, Codable {
    /// The integration that created the request: the only one that may read, complete or cancel it.
    public var integrationID: String
    /// Shown on the phone and named in the audit trail.
    public var integrationName: String
    /// The account, as the integration named it (normalised), for its webhooks.
    public var userEmail: String
    /// At most ``titleLimit`` characters.
    public var title: String
    /// At most ``bodyLimit`` characters; may be empty.
    public var body: String
    /// Strings of at most ``contextValueLimit`` characters each.
    public var context: [String: String]

    public init(integrationID: String, integrationName: String, userEmail: String, title: String, body: String, context: [String: String]) {
        self.integrationID = integrationID
        self.integrationName = integrationName
        self.userEmail = userEmail
        self.title = title
        self.body = body
        self.context = context
    }

    public static let titleLimit = 80
    public static let bodyLimit = 240
    public static let contextValueLimit = 200
    /// Keys in `context`, and the length of each key.
    public static let contextKeysLimit = 20
    public static let contextKeyLimit = 64
}

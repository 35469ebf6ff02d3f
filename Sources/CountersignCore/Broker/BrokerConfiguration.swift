import Foundation

public struct BrokerConfiguration: Sendable, Equatable {
    /// How long a request stays pending.
    public var requestTTL: TimeInterval
    /// How long an approved request may wait for completion.
    public var completionWindow: TimeInterval
    /// Whether approvals must carry the number code shown to the requester.
    public var numberMatching: Bool
    /// How long a fraud report silences the user's prompts.
    public var fraudSilence: TimeInterval

    public init(
        requestTTL: TimeInterval = 60,
        completionWindow: TimeInterval = 120,
        numberMatching: Bool = true,
        fraudSilence: TimeInterval = 3600
    ) {
        self.requestTTL = requestTTL
        self.completionWindow = completionWindow
        self.numberMatching = numberMatching
        self.fraudSilence = fraudSilence
    }
}

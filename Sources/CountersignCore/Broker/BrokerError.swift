public enum BrokerError: Error, Equatable {
    /// No such request, or not one the caller may see.
    case notFound
    case refused(Refusal)
}

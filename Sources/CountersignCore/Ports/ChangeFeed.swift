/// The transitions other processes commit to a database they share with this
/// one (a cluster's nodes): what wakes this node's long polls for requests
/// another node answered. A database only this process writes has none.
public protocol ChangeFeed: Sendable {
    /// Follows the changes until the calling task is cancelled: `onChange`
    /// gets the id of each request another process changed; `onGap` is called
    /// whenever changes may have gone unheard (on connecting, and after every
    /// reconnection), so that waiters read their requests again.
    func follow(onChange: @escaping @Sendable (String) async -> Void, onGap: @escaping @Sendable () async -> Void) async
}

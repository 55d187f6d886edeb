/// A small value shared by every node and pushed to all of them when it changes: the upstream
/// `status` view model's state (a rate limit or an outage seen by one node shows on every node).
///
/// Threading: bound to one loop; call it there; completions and the observer run there.
public protocol StatusBoard: AnyObject {
    /// Stores `value` as the latest and announces it to every node, in one step.
    func post(_ value: [UInt8], completion: @escaping (Result<Void, StoreError>) -> Void)
    /// The latest value, or nil (none posted, or expired).
    func latest(completion: @escaping (Result<[UInt8]?, StoreError>) -> Void)
    /// Calls `observer` with every value posted from now on (by any node, this one included);
    /// `onSubscribed` runs when that starts, and again after a reconnect (read `latest` then).
    func observe(onSubscribed: @escaping () -> Void, _ observer: @escaping ([UInt8]) -> Void)
}

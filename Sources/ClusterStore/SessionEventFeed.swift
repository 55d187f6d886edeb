/// Live delivery of a session's committed events to the streams on any node (cluster mode).
///
/// Threading: bound to one loop; call it there; handlers run there.
/// Order of use for a reconnecting stream: subscribe, wait for `onSubscribed`, then `replay` from
/// the store, then drop live events whose id is not above the last one written (de-duplicate).
public protocol SessionEventFeed: AnyObject {
    /// Delivers every event committed to `sessionID` from now on to `handler`; `onSubscribed` runs
    /// once the subscription is active, and again after a reconnect (events in between were missed:
    /// replay from the last id written).
    func subscribe(
        sessionID: String, onSubscribed: @escaping () -> Void, _ handler: @escaping (StoredEvent) -> Void)

    /// Stops delivering `sessionID`.
    func unsubscribe(sessionID: String)
}

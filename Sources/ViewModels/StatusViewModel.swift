import GitHubSearch

/// The `status` view model: ONE instance for the whole app, shown in every session.
///
/// Owner rule: like every store it has one owner (the loop the sessions live on). `update(_:)` is
/// owner-only; other threads (the GitHub gateway's) use the function from `makeUpdater()`, which hops to
/// the owner through the executor. Its events have `inputSeq` nil; the session layer fans them out.
public typealias StatusViewModel = Store<StatusFeature>

extension Store where Feature == StatusFeature {
    /// A status view model starting at `initial` (default: reachable, no message, rate limit unknown).
    /// `executor` runs work on the owner; it is used by `makeUpdater()`.
    public convenience init(initial: UpstreamStatus = UpstreamStatus(), executor: @escaping OwnerExecutor) {
        self.init(feature: StatusFeature(), initialState: initial, executor: executor)
    }

    /// Sets the status (owner only); emits an event with `inputSeq` nil when an output changed.
    /// Also the test hook: tests set any status directly.
    public func update(_ status: UpstreamStatus) {
        apply(.statusUpdated(status), inputSeq: nil)
    }

    /// A function any thread may call to report a status; it hops to the owner via the executor.
    /// Reports after the view model is gone are dropped.
    public func makeUpdater() -> @Sendable (UpstreamStatus) -> Void {
        let handle = ownerBound
        let executor = self.executor
        return { status in executor { handle.value?.update(status) } }
    }
}

import GitHubSearch
import ViewModels

/// The `status` view model: ONE instance for the whole app, shown in every session.
///
/// Registered app-wide (`ViewModelScope.app`): the application sends it every `UpstreamStatus` the
/// GitHub gateway reports as a notice, on its owner (the loop the application gave it). Its events have
/// `inputSeq` nil; the session layer fans them out.
public typealias StatusViewModel = Store<StatusFeature>

extension Store where Feature == StatusFeature {
    /// A status view model starting at `initial` (default: reachable, no message, rate limit unknown).
    /// It has no effects: a status arrives as a notice (`receive`) or through `update(_:)`.
    public convenience init(initial: UpstreamStatus = UpstreamStatus()) {
        self.init(feature: StatusFeature(), initialState: initial)
    }

    /// Sets the status (owner only); emits an event with `inputSeq` nil when an output changed.
    /// Also the test hook: tests set any status directly.
    public func update(_ status: UpstreamStatus) {
        apply(.statusUpdated(status), inputSeq: nil)
    }
}

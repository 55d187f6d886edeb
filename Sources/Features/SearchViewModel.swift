import GitHubSearch
import ViewModels

/// The `search` view model: one per session, touched only on its session's owner; search results hop
/// back through the executor.
public typealias SearchViewModel<Searcher: RepositorySearching> = Store<SearchFeature<Searcher>>

extension Store {
    /// A search view model using `search`, `perPage` results per page and `clock`; results are applied on
    /// the owner through `executor`.
    public convenience init<Searcher: RepositorySearching>(
        search: Searcher, perPage: Int = 30, clock: any SearchClock = SystemSearchClock(),
        executor: @escaping OwnerExecutor
    ) where Feature == SearchFeature<Searcher> {
        self.init(
            feature: SearchFeature(searcher: search, perPage: perPage, clock: clock), initialState: SearchState(),
            executor: executor)
    }
}

/// Features: the product's view models — `search` (GitHub repository search over the cached model),
/// `greeting` (the smallest example) and the app-wide `status` (GitHub's reachability and rate limit) —
/// written with the `ViewModels` kit, and their registration (`ViewModelRegistry.product`). Nothing
/// here knows of HTTP, sessions or Redis.
import GitHubSearch
import ViewModels

extension ViewModelRegistry {
    /// The product's view models: `search` (each session's searches charged to its client, so GitHub's
    /// budget is shared fairly) and `greeting` per session, `status` app-wide. `clock` is the search's
    /// time (rate-limit countdowns).
    public static func product<Searcher: RepositorySearching>(
        search: Searcher, pageSize: Int, clock: any SearchClock = SystemSearchClock()
    ) -> ViewModelRegistry {
        var r = ViewModelRegistry()
        r.register(SearchFeature<ChargedSearch<Searcher>>.self, initialState: SearchState()) { context in
            SearchFeature(
                searcher: ChargedSearch(client: context.client, base: search), perPage: pageSize, clock: clock)
        }
        r.register(GreetingFeature.self, initialState: .init()) { _ in GreetingFeature() }
        r.register(StatusFeature.self, scope: .app, initialState: UpstreamStatus()) { _ in StatusFeature() }
        return r
    }
}

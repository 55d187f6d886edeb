/// Features: the product's view models — `search` (GitHub repository search over the cached model),
/// `greeting` (the smallest example) and the app-wide `status` (GitHub's reachability and rate limit) —
/// written with the `ViewModels` kit, and their registration (`ViewModelRegistry.product`). Nothing
/// here knows of HTTP, sessions or Redis.
import GitHubSearch
import ViewModels

extension ViewModelRegistry {
    /// The product's view models: `search` (its pages cut from GitHub's 100-result pages, `WidePages`;
    /// each session's searches charged to its client, so GitHub's budget is shared fairly, and a signed-in
    /// session's to its person's own token), `greeting` and
    /// `account` per session, `status` app-wide. `clock` is the search's time (rate-limit countdowns);
    /// `signInEnabled`: sign-in is configured (`account.signInEnabled`).
    public static func product<Searcher: RepositorySearching>(
        search: Searcher, pageSize: Int, clock: any SearchClock = SystemSearchClock(), signInEnabled: Bool = false
    ) -> ViewModelRegistry {
        var r = ViewModelRegistry()
        // Pages of `pageSize` are served from GitHub's 100-result pages: a load-more within one costs no call.
        let wide = WidePages(base: search)
        r.register(SearchFeature<ChargedSearch<WidePages<Searcher>>>.self, initialState: SearchState()) { context in
            let person = context.person?.loginKey
            return SearchFeature(
                searcher: ChargedSearch(client: context.client, person: person, base: wide), perPage: pageSize,
                clock: clock, ownBudget: person != nil)
        }
        r.register(GreetingFeature.self, initialState: .init()) { _ in GreetingFeature() }
        r.register { context in
            Store(
                feature: AccountFeature(),
                initialState: AccountFeature.State(signInEnabled: signInEnabled, person: context.person),
                executor: context.executor)
        }
        r.register(StatusFeature.self, scope: .app, initialState: UpstreamStatus()) { _ in StatusFeature() }
        return r
    }
}

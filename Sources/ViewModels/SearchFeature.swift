import GitHubSearch
import JSON

/// The `search` view model's logic: GitHub repository search with paging, refresh, sort and selection.
///
/// Generic over the search client so calls dispatch statically. A pure value; run it with
/// `SearchViewModel` (a `Store`), on that store's owner.
///
/// Rules beyond the contract:
/// - `refresh` re-runs the search shown (the last submitted query and the current sort), page 1 only,
///   with `CachePolicy.revalidate`; it is a no-op before the first search and supersedes a request
///   under way.
/// - A sort change re-runs the search shown (page 1); before the first search it only sets the sort.
/// - `select` with an id not in `repositories` emits nothing (a click that raced a new result list is
///   not malformed input, so it is not a 400).
/// - A failed first page clears the results; a failed next page keeps them and `hasMore`, so
///   `loadMore` can retry. Starting any request clears `error`.
/// - Old results stay visible while a new search loads; they are replaced when it answers.
/// - `stale` is true when any page shown came from stale cache.
public struct SearchFeature<Searcher: RepositorySearching>: ViewModelFeature {
    /// The search client (live gateway, cache, or a test fake).
    public let searcher: Searcher
    /// Results per page, 1...100.
    public let perPage: Int

    /// A feature searching with `searcher`, `perPage` results per page (clamped to 1...100).
    public init(searcher: Searcher, perPage: Int = 30) {
        self.searcher = searcher
        self.perPage = min(max(perPage, 1), SearchRequest.maximumPageSize)
    }

    /// The search state.
    public typealias State = SearchState
    /// The search actions.
    public typealias Action = SearchAction

    /// The contract name.
    public var name: String { "search" }
    /// The input names, in the contract's order.
    public var inputNames: [String] { ["query", "sort", "submit", "loadMore", "refresh", "select"] }

    /// Parses a named input into an action (see `ViewModelFeature`).
    public func action(forInput input: String, value: JSONValue) throws(InputError) -> Action {
        let v = InputValue(viewModel: name, input: input, value: value)
        switch input {
        case "query": return .queryChanged(try v.string())
        case "sort": return .sortChanged(try v.oneOf(SearchSort.self))
        case "submit":
            try v.none()
            return .submitTapped
        case "loadMore":
            try v.none()
            return .loadMoreTapped
        case "refresh":
            try v.none()
            return .refreshTapped
        case "select": return .rowSelected(id: try v.integer("an integer repository id"))
        default: throw unknownInput(input)
        }
    }

    /// The transition (see `ViewModelFeature`).
    public func reduce(_ state: inout State, _ action: Action) -> [Effect<Action>] {
        switch action {
        case .queryChanged(let query):
            state.query = query
            return []
        case .sortChanged(let sort):
            guard sort != state.sort else { return [] }
            state.sort = sort
            guard var request = state.current else { return [] }
            request.sort = sort
            return start(request, policy: .useCache, in: &state)
        case .submitTapped:
            guard state.searchEnabled else { return [] }
            let request = SearchRequest(query: trimmed(state.query), sort: state.sort, page: 1, perPage: perPage)
            return start(request, policy: .useCache, in: &state)
        case .loadMoreTapped:
            guard state.hasMore, !state.isLoading, var request = state.current else { return [] }
            request.page = state.loadedPage + 1
            guard !request.isPastResultCap else { return [] }
            return start(request, policy: .useCache, in: &state)
        case .refreshTapped:
            guard let request = state.current else { return [] }
            return start(request, policy: .revalidate, in: &state)
        case .rowSelected(let id):
            guard let repository = state.repositories.first(where: { $0.id == id }) else { return [] }
            return [.signal("openURL", .string(repository.htmlURL)), .signal("deselect", .int(id))]
        case .searchResponse(let generation, let request, let result):
            guard generation == state.generation, state.isLoading else { return [] }
            receive(result, for: request, in: &state)
            return []
        }
    }

    /// Starts `request` as the newest generation; page 1 becomes the search shown.
    private func start(_ request: SearchRequest, policy: CachePolicy, in state: inout State) -> [Effect<Action>] {
        state.generation += 1
        state.isLoading = true
        state.error = nil
        if request.page == 1 { state.current = request }
        let generation = state.generation
        let searcher = self.searcher
        return [
            .run {
                do throws(SearchError) {
                    let response = try await searcher.search(request, policy: policy)
                    return .searchResponse(generation: generation, request: request, .success(response))
                } catch {
                    return .searchResponse(generation: generation, request: request, .failure(error))
                }
            }
        ]
    }

    private func receive(
        _ result: Result<SearchResponse, SearchError>, for request: SearchRequest, in state: inout State
    ) {
        state.isLoading = false
        switch result {
        case .success(let response):
            let page = response.page
            if request.page == 1 {
                state.repositories = []
                state.stale = response.isStale
            } else {
                state.stale = state.stale || response.isStale
            }
            var seen = Set(state.repositories.map(\.id))
            for repository in page.repositories where seen.insert(repository.id).inserted {
                state.repositories.append(repository)
            }
            state.totalCount = page.totalCount
            state.loadedPage = request.page
            state.hasMore = page.hasMore && !request.nextPage.isPastResultCap
        case .failure(let error):
            state.error = error
            if request.page == 1 {
                state.repositories = []
                state.totalCount = 0
                state.hasMore = false
                state.stale = false
                state.loadedPage = 0
            }
        }
    }

    private func trimmed(_ text: String) -> String {
        guard let first = text.firstIndex(where: { !$0.isWhitespace }),
            let last = text.lastIndex(where: { !$0.isWhitespace })
        else { return "" }
        return String(text[first...last])
    }
}

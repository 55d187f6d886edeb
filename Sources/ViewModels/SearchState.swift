import GitHubSearch

/// The `search` view model's state (top level rather than nested, so it is not generic over the
/// search client).
public struct SearchState: Equatable, Sendable {
    /// The query text as typed (the `query` output).
    public var query: String
    /// The chosen order (the `sort` output).
    public var sort: SearchSort
    /// True while a search or a next page is being fetched.
    public var isLoading: Bool
    /// The results shown; ids are unique.
    public var repositories: [Repository]
    /// GitHub's total match count of the search shown.
    public var totalCount: Int
    /// True when `loadMore` can fetch another page.
    public var hasMore: Bool
    /// The last failure, until the next search or page starts.
    public var error: SearchError?
    /// True when (some of) the results come from cache past its freshness.
    public var stale: Bool
    /// The first-page request of the search shown or under way; nil before the first search. `refresh`,
    /// `loadMore` and sort changes work on it, not on the text being edited.
    public var current: SearchRequest?
    /// The last page of `current` that was loaded (0 for none).
    public var loadedPage: Int
    /// The number of the latest search or page started; a response carrying another number is from a
    /// superseded request and is ignored.
    public var generation: Int

    /// The initial state: empty query, best match, nothing loaded.
    public init(query: String = "", sort: SearchSort = .bestMatch) {
        self.query = query
        self.sort = sort
        isLoading = false
        repositories = []
        totalCount = 0
        hasMore = false
        error = nil
        stale = false
        current = nil
        loadedPage = 0
        generation = 0
    }

    /// Submitting is possible when the query is not blank and nothing is loading.
    public var searchEnabled: Bool { !isLoading && !query.allSatisfy(\.isWhitespace) }
}

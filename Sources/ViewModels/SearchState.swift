import GitHubSearch

/// The `search` view model's state (top level rather than nested, so it is not generic over the
/// search client).
///
/// Durable: every field but `generation` is stored (see `CodingKeys`). `generation` only tells the
/// answers of requests under way apart, and no request survives a restore (the restored view model
/// issues `inFlight` again under a new generation), so it restarts at 0. `retryAt` is stored (wall-clock
/// seconds, meaningful on any node); its timer is not, and a restore arms it again.
public struct SearchState: Equatable, Sendable, Codable {
    /// The query text as typed (the `query` output).
    public var query: String
    /// The chosen order (the `sort` output).
    public var sort: SearchSort
    /// True while a search or a next page is being fetched.
    public var isLoading: Bool
    /// The results shown; ids are unique.
    public var repositories: [Repository]
    /// GitHub's total match count of the search shown; nil until a search answered (and after a
    /// first page failed).
    public var totalCount: Int?
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
    /// While rate limited: the time (seconds since 1970, whole seconds) at which searching is possible
    /// again; nil otherwise. Set by a `rateLimited` failure, cleared by the timer effect at that time.
    public var retryAt: Int?
    /// The number of the latest search or page started; a response carrying another number is from a
    /// superseded request and is ignored.
    public var generation: Int = 0
    /// The request under way while `isLoading`, with its cache policy; nil otherwise.
    public var inFlight: SearchInFlight?

    /// The stored names: explicit so a rename cannot change what was written before. `generation` is
    /// transient (not stored).
    enum CodingKeys: String, CodingKey {
        case query, sort, isLoading, repositories, totalCount, hasMore, error, stale, current, loadedPage, retryAt
        case inFlight
    }

    /// The initial state: empty query, best match, nothing loaded.
    public init(query: String = "", sort: SearchSort = .bestMatch) {
        self.query = query
        self.sort = sort
        isLoading = false
        repositories = []
        totalCount = nil
        hasMore = false
        error = nil
        stale = false
        current = nil
        loadedPage = 0
        retryAt = nil
        inFlight = nil
    }

    /// Submitting is possible when the query is not blank, nothing is loading and no rate limit is in force.
    public var searchEnabled: Bool { !isLoading && retryAt == nil && !query.allSatisfy(\.isWhitespace) }

    /// Loading the next page is possible when there is one, nothing is loading and no rate limit is in force.
    public var loadMoreEnabled: Bool { hasMore && !isLoading && retryAt == nil }

    /// The sentence the search area shows for `error`: nil without an error, and nil for a rate limit
    /// (it is app-wide, so the shared `status` view model's `message` banner says it, once).
    public var errorMessage: String? {
        guard let error else { return nil }
        if case .rateLimited = error { return nil }
        return error.message
    }
}

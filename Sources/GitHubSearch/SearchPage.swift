/// Where a result came from, as the `X-Cache` header says it.
public enum CacheOutcome: String, Sendable, Equatable, Codable {
    /// Served from a fresh cache entry.
    case hit
    /// Fetched from upstream (nothing usable was cached).
    case miss
    /// Served from an entry past its freshness (upstream failed or is being revalidated).
    case stale
    /// A stale or forced entry was revalidated with upstream just now.
    case revalidated
}

/// One page of search results.
public struct SearchPage: Sendable, Equatable, Codable {
    /// GitHub's `total_count` (all matches, not only the reachable 1000).
    public var totalCount: Int
    /// GitHub's `incomplete_results`.
    public var incompleteResults: Bool
    public var repositories: [Repository]
    /// The 1-based page number these results are.
    public var page: Int
    /// True when a next page exists and lies within the 1000-result cap.
    public var hasMore: Bool

    public init(totalCount: Int, incompleteResults: Bool, repositories: [Repository], page: Int, hasMore: Bool) {
        self.totalCount = totalCount
        self.incompleteResults = incompleteResults
        self.repositories = repositories
        self.page = page
        self.hasMore = hasMore
    }
}

/// A page plus how it was obtained.
public struct SearchResponse: Sendable, Equatable {
    public var page: SearchPage
    public var cache: CacheOutcome
    /// True when the page is past its freshness because upstream could not be reached.
    public var isStale: Bool

    public init(page: SearchPage, cache: CacheOutcome, isStale: Bool = false) {
        self.page = page
        self.cache = cache
        self.isStale = isStale
    }
}

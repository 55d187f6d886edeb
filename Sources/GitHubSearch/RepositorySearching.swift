/// Anything that can search repositories: the live gateway, the cache decorator, test fakes.
///
/// Implementations are `Sendable` and may be called from any thread; they never block the
/// caller's thread (all waiting happens in `await`).
public protocol RepositorySearching: Sendable {
    /// Returns one page of results or throws a `SearchError`.
    func search(_ request: SearchRequest, policy: CachePolicy) async throws(SearchError) -> SearchResponse
}

extension RepositorySearching {
    /// Searches with the default cache policy.
    public func search(_ request: SearchRequest) async throws(SearchError) -> SearchResponse {
        try await search(request, policy: .useCache)
    }
}

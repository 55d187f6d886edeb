/// The client an upstream (GitHub) call is made for: the fair-use rules share GitHub's budget between
/// clients (`RateLimiter`), so each call is charged to one. A task-local, set by whoever starts the work
/// for a client (a session's search dependency, the stateless search route) and inherited by every task
/// the work starts: a search that joins another client's call in flight (single flight) is not charged,
/// and a cached answer never reaches the limiter. Nil: charged to nobody (not limited per client).
public enum UpstreamClient {
    /// The client of the current task's upstream work (an opaque key, e.g. an IP address).
    @TaskLocal public static var current: String?
}

/// A search dependency that charges every call to `client` (`UpstreamClient`; nil: to nobody), over the
/// shared model.
public struct ChargedSearch<Base: RepositorySearching>: RepositorySearching {
    public let client: String?
    public let base: Base

    public init(client: String?, base: Base) {
        self.client = client
        self.base = base
    }

    public func search(_ request: SearchRequest, policy: CachePolicy) async throws(SearchError) -> SearchResponse {
        let result: Result<SearchResponse, SearchError> = await UpstreamClient.$current.withValue(client) {
            do throws(SearchError) {
                return .success(try await base.search(request, policy: policy))
            } catch {
                return .failure(error)
            }
        }
        return try result.get()
    }
}

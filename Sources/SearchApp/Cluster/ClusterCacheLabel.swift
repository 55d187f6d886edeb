import GitHubLive
import GitHubSearch

/// Cluster mode's search model: the node's own `SearchCache` over the shared cache
/// (`ClusterSearchUpstream`), with `X-Cache` telling the truth. The node cache labels every answer it
/// had to fetch `miss`; when that fetch was answered by a fresh entry of the shared cache — a page another
/// node (or an earlier call) had fetched, GitHub not called for this answer — it is a `hit`. `miss` stays
/// for an answer GitHub was called for: by this request, or by an identical one in flight that it waited
/// for, on any node (the shared cache's `filled`, `filledByOther`, `lockTimedOut`).
///
/// Threading: `Sendable`; any task (the cache is an actor, the upstream's record behind a lock).
struct ClusterCacheLabel: RepositorySearching {
    let cache: SearchCache<ClusterSearchUpstream>
    let shared: ClusterSearchUpstream

    func search(_ request: SearchRequest, policy: CachePolicy) async throws(SearchError) -> SearchResponse {
        var r = try await cache.search(request, policy: policy)
        if r.cache == .miss, shared.answeredFromSharedEntry(request) { r.cache = .hit }
        return r
    }
}

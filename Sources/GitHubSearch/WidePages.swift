/// Serves pages of the size a caller asks for (the view model's 30) from upstream pages of `widePerPage`
/// (GitHub's largest, 100), so one call to GitHub answers the first page and the next two `loadMore`s:
/// a load-more within a fetched wide page is a cache hit, not a call. A page that straddles two wide
/// pages (results 91–120) reads both. Everything below (the cache, single flight, the budgets) sees only
/// wide pages; the caller sees its own page size, numbering and `hasMore` as before.
///
/// A value; any thread.
public struct WidePages<Base: RepositorySearching>: RepositorySearching {
    public let base: Base
    public let widePerPage: Int

    public init(base: Base, widePerPage: Int = SearchRequest.maximumPageSize) {
        self.base = base
        self.widePerPage = min(max(widePerPage, 1), SearchRequest.maximumPageSize)
    }

    public func search(_ request: SearchRequest, policy: CachePolicy) async throws(SearchError) -> SearchResponse {
        let size = request.perPage
        // Already wide enough, or past the cap (the gateway answers that empty without a call).
        guard size < widePerPage, request.page >= 1, !request.isPastResultCap else {
            return try await base.search(request, policy: policy)
        }
        let first = (request.page - 1) * size  // index of the page's first result
        let end = min(first + size, SearchRequest.resultCap)  // one past its last
        var wide = request
        wide.perPage = widePerPage
        wide.page = first / widePerPage + 1
        var responses = [try await base.search(wide, policy: policy)]
        var known = (wide.page - 1) * widePerPage + responses[0].page.repositories.count
        // The page runs on into the next wide page, and that page exists.
        if known < end, responses[0].page.repositories.count == widePerPage, responses[0].page.hasMore {
            wide.page += 1
            responses.append(try await base.search(wide, policy: policy))
            known += responses[1].page.repositories.count
        }
        let offset = (first / widePerPage) * widePerPage
        let all = responses.flatMap(\.page.repositories)
        let from = min(first - offset, all.count)
        let to = min(end - offset, all.count)
        let last = responses[responses.count - 1].page
        let more = end < known || (end == known && last.hasMore)
        let page = SearchPage(
            totalCount: responses[0].page.totalCount,
            incompleteResults: responses.contains { $0.page.incompleteResults },
            repositories: Array(all[from..<to]), page: request.page,
            hasMore: more && end < SearchRequest.resultCap)
        return SearchResponse(
            page: page, cache: Self.combined(responses.map(\.cache)), isStale: responses.contains { $0.isStale })
    }

    /// What two reads of the cache came to, for the page made of them: a call to GitHub for either is a
    /// `miss`; else a revalidation; else stale; else a hit.
    static func combined(_ outcomes: [CacheOutcome]) -> CacheOutcome {
        if outcomes.contains(.miss) { return .miss }
        if outcomes.contains(.revalidated) { return .revalidated }
        if outcomes.contains(.stale) { return .stale }
        return .hit
    }
}

import GitHubSearch
import JSON

/// Test data and expected JSON for the `search` view model tests.
enum SearchFixtures {
    /// A repository with the given id (odd ids have no description or language).
    static func repo(_ id: Int) -> Repository {
        Repository(
            id: id, fullName: "owner\(id)/repo\(id)", owner: "owner\(id)",
            avatarURL: "https://avatars.example/\(id)", description: id % 2 == 0 ? "repo \(id)" : nil,
            language: id % 2 == 0 ? "Swift" : nil, stars: id * 10, forks: id, topics: id % 2 == 0 ? ["t\(id)"] : [],
            htmlURL: "https://github.com/owner\(id)/repo\(id)", updatedAt: "2026-01-0\(id % 9 + 1)T00:00:00Z")
    }

    /// The contract's JSON of `repo(id)`.
    static func repoJSON(_ id: Int) -> JSONValue {
        [
            "id": .int(id), "fullName": .string("owner\(id)/repo\(id)"), "owner": .string("owner\(id)"),
            "avatarUrl": .string("https://avatars.example/\(id)"),
            "description": id % 2 == 0 ? .string("repo \(id)") : .null,
            "language": id % 2 == 0 ? "Swift" : .null, "stars": .int(id * 10), "forks": .int(id),
            "topics": id % 2 == 0 ? [.string("t\(id)")] : [],
            "url": .string("https://github.com/owner\(id)/repo\(id)"),
            "updatedAt": .string("2026-01-0\(id % 9 + 1)T00:00:00Z"),
        ]
    }

    /// A list of repository JSON values.
    static func reposJSON(_ ids: [Int]) -> JSONValue { .array(ids.map(repoJSON)) }

    /// A successful response with the given ids.
    static func response(
        _ ids: [Int], page: Int = 1, total: Int = 100, hasMore: Bool = true, stale: Bool = false
    ) -> Result<SearchResponse, SearchError> {
        .success(
            SearchResponse(
                page: SearchPage(
                    totalCount: total, incompleteResults: false, repositories: ids.map(repo), page: page,
                    hasMore: hasMore),
                cache: stale ? .stale : .miss, isStale: stale))
    }

    /// A request as the view model builds it.
    static func request(_ query: String, _ sort: SearchSort = .bestMatch, page: Int = 1, perPage: Int = 30)
        -> SearchRequest
    {
        SearchRequest(query: query, sort: sort, order: .desc, page: page, perPage: perPage)
    }

    /// The full expected snapshot: every output stated. `loadMoreEnabled` and `errorMessage` default to
    /// what the other outputs imply (so a test that states them proves the rule, others need not repeat it).
    static func snapshot(
        query: String, sort: String, searchEnabled: Bool, isLoading: Bool, repositories: [Int], totalCount: Int?,
        hasMore: Bool, error: JSONValue, stale: Bool, loadMoreEnabled: Bool? = nil, errorMessage: JSONValue? = nil,
        retryAt: String? = nil
    ) -> JSONObject {
        var impliedMessage: JSONValue = .null
        if case .object(let e) = error, e["kind"] != "rateLimited" { impliedMessage = e["message"] ?? .null }
        return [
            "query": .string(query), "sort": .string(sort), "searchEnabled": .bool(searchEnabled),
            "isLoading": .bool(isLoading), "repositories": reposJSON(repositories), "totalCount": .optional(totalCount),
            "hasMore": .bool(hasMore), "error": error, "stale": .bool(stale),
            "loadMoreEnabled": .bool(loadMoreEnabled ?? (hasMore && !isLoading && retryAt == nil)),
            "errorMessage": errorMessage ?? impliedMessage, "retryAt": .optional(retryAt),
        ]
    }
}

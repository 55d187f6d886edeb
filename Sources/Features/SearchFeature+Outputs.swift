import GitHubSearch
import JSON
import ViewModels

extension SearchFeature {
    /// The state outputs in snapshot order.
    public var outputs: [Output<State>] {
        [
            .string("query") { $0.query },
            Output("sort", { $0.sort }, encode: { .string($0.rawValue) }),
            .bool("searchEnabled") { $0.searchEnabled },
            .bool("isLoading") { $0.isLoading },
            Output("repositories", { $0.repositories }, encode: { .array($0.map(SearchJSON.repository)) }),
            Output("totalCount", { $0.totalCount }, encode: JSONValue.optional),
            .bool("hasMore") { $0.hasMore },
            Output("error", { $0.error }, encode: SearchJSON.error),
            .bool("stale") { $0.stale },
            .bool("loadMoreEnabled") { $0.loadMoreEnabled },
            .optionalString("errorMessage") { $0.errorMessage },
            Output(
                "retryAt", { $0.retryAt },
                encode: { $0.map { .string(UTCTimestamp.iso8601(epochSeconds: $0)) } ?? .null }),
        ]
    }
}

/// The JSON shapes of the `search` outputs (pure functions).
public enum SearchJSON {
    /// `{"id","fullName","owner","avatarUrl","description","language","stars","forks","topics","url","updatedAt"}`.
    public static func repository(_ r: Repository) -> JSONValue {
        .object(
            JSONObject([
                ("id", .int(r.id)), ("fullName", .string(r.fullName)), ("owner", .string(r.owner)),
                ("avatarUrl", .string(r.avatarURL)), ("description", .optional(r.description)),
                ("language", .optional(r.language)), ("stars", .int(r.stars)), ("forks", .int(r.forks)),
                ("topics", .array(r.topics.map(JSONValue.string))), ("url", .string(r.htmlURL)),
                ("updatedAt", .string(r.updatedAt)),
            ]))
    }

    /// `null` or `{"kind","message","retryAfterSeconds"}`.
    public static func error(_ error: SearchError?) -> JSONValue {
        guard let error else { return .null }
        return [
            "kind": .string(error.kind), "message": .string(error.message),
            "retryAfterSeconds": .optional(error.retryAfterSeconds),
        ]
    }
}

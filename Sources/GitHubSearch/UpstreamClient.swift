/// The client an upstream (GitHub) call is made for: the fair-use rules share GitHub's budget between
/// clients (`RateLimiter`), so each call is charged to one. A task-local, set by whoever starts the work
/// for a client (a session's search dependency, the stateless search route) and inherited by every task
/// the work starts: a search that joins another client's call in flight (single flight) is not charged,
/// and a cached answer never reaches the limiter. Nil: charged to nobody (not limited per client).
public enum UpstreamClient {
    /// The client of the current task's upstream work (an opaque key, e.g. an IP address).
    @TaskLocal public static var current: String?
}

/// Whose GitHub token and budget an upstream call spends: a signed-in person's (the key of their login),
/// or, nil, the application's (`GITHUB_TOKEN`, shared fairly between clients). A task-local like
/// `UpstreamClient`, set by a signed-in session's search dependency; only a call that reaches GitHub
/// reads it (a cached answer, or one joined in flight, costs nobody's budget).
public enum UpstreamPerson {
    /// The login key of the person the current task's upstream work is for.
    @TaskLocal public static var current: String?
}

/// What a signed-in person's own GitHub budget says (their token's rate limit and block), posted to that
/// person's sessions only: their `search` follows it instead of the application's `UpstreamStatus`.
public struct PersonalUpstreamStatus: Sendable, Equatable {
    public var status: UpstreamStatus
    public init(_ status: UpstreamStatus) { self.status = status }
}

/// A search dependency that charges every call to `client` (`UpstreamClient`; nil: to nobody) and, for a
/// signed-in session, spends `person`'s budget (`UpstreamPerson`), over the shared model.
public struct ChargedSearch<Base: RepositorySearching>: RepositorySearching {
    public let client: String?
    /// The login key of the signed-in person whose token a call to GitHub uses; nil: the application's.
    public let person: String?
    public let base: Base

    public init(client: String?, person: String? = nil, base: Base) {
        self.client = client
        self.person = person
        self.base = base
    }

    public func search(_ request: SearchRequest, policy: CachePolicy) async throws(SearchError) -> SearchResponse {
        let result: Result<SearchResponse, SearchError> = await UpstreamClient.$current.withValue(client) {
            await UpstreamPerson.$current.withValue(person) {
                do throws(SearchError) {
                    return .success(try await base.search(request, policy: policy))
                } catch {
                    return .failure(error)
                }
            }
        }
        return try result.get()
    }
}

import GitHubSearch
import ViewModels

/// The request the `search` view model is waiting for, kept in its state so that a restored view model
/// that was loading can issue it again (with the same cache policy: a refresh stays a revalidation).
public struct SearchInFlight: Equatable, Sendable, Codable {
    /// The page being fetched (page 1 of a new search, sort change or refresh; a later page for `loadMore`).
    public var request: SearchRequest
    /// How the cache was asked to treat it.
    public var policy: CachePolicy

    /// The stored names; explicit so a rename cannot change them.
    enum CodingKeys: String, CodingKey {
        case request, policy
    }

    /// A request under way with `policy`.
    public init(request: SearchRequest, policy: CachePolicy) {
        self.request = request
        self.policy = policy
    }
}

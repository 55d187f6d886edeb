import GitHubSearch

/// An upstream that can tell, without calling GitHub, whether a call now would be refused for
/// the rate limit. `SearchCache` asks it before revalidating an expired entry: while refused, the
/// entry is served marked stale and no call is attempted.
public protocol UpstreamBudgetReporting: Sendable {
    /// The `rateLimited` error a call would get now without reaching GitHub, or nil.
    func limitedNow() async -> SearchError?
}

extension GitHubGateway: UpstreamBudgetReporting {
    public func limitedNow() async -> SearchError? { await rateLimiter.blockedError() }
}

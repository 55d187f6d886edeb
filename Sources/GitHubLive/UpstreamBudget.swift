import GitHubSearch

/// An upstream that can tell, without calling GitHub, whether a call now would be refused and how
/// many calls are left in the current rate-limit window. `SearchCache` asks it before spending a
/// call on a background revalidation (see `SearchCache.Configuration.revalidationReserve`).
public protocol UpstreamBudgetReporting: Sendable {
    /// The `rateLimited` error a call would get now without reaching GitHub, or nil.
    func limitedNow() async -> SearchError?
    /// Calls left in the current window and the window's limit, as GitHub last reported them; nil
    /// when unknown (no answer yet, or the window has reset since).
    func remainingCalls() async -> (remaining: Int, limit: Int)?
}

extension GitHubGateway: UpstreamBudgetReporting {
    public func limitedNow() async -> SearchError? { await rateLimiter.blockedError() }
    public func remainingCalls() async -> (remaining: Int, limit: Int)? { await rateLimiter.remainingCalls() }
}

extension RateLimiter {
    /// `X-RateLimit-Remaining` and `-Limit` of the last answer while its window lasts, else nil.
    public func remainingCalls() -> (remaining: Int, limit: Int)? {
        guard let last = lastRateLimit, Double(last.resetAt) > clock.now() else { return nil }
        return (last.remaining, last.limit)
    }
}

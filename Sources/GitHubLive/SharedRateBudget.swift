/// A budget of upstream calls shared with other processes (cluster mode: a Redis token bucket), so N
/// processes together never call GitHub more than one would, a limit GitHub reports to one blocks
/// all, and a client's fair share holds across them. `RateLimiter` asks it after its own checks, before
/// every call, and reports every answer.
public protocol SharedRateBudget: Sendable {
    /// Takes one call's share, charged to `client` (`UpstreamClient`; nil: nobody, no per-client cap).
    /// An unreachable shared store should answer `.admitted` (the local limiter still applies).
    func admit(client: String?) async -> SharedBudgetAnswer
    /// What GitHub answered: `X-RateLimit-Remaining`, and the wall time (seconds since 1970) before
    /// which no call may be made (reset or `Retry-After`), nil when not blocked.
    func report(remaining: Int?, blockedUntil: Double?) async
    /// Gives back the share `admit` took for a call GitHub did not count (a `304` to a conditional
    /// request); called before that answer's `report`.
    func refund() async
}

/// The answer of `SharedRateBudget.admit`.
public enum SharedBudgetAnswer: Sendable, Equatable {
    /// The call may go ahead (its share is taken).
    case admitted
    /// No call for anyone for `seconds` (the shared budget is spent or GitHub blocked us).
    case blocked(seconds: Double)
    /// This client has started its `cap` of the window's `limit` calls (on every process together): it
    /// waits `seconds`, the others may still call.
    case overShare(seconds: Double, cap: Int, limit: Int)
}

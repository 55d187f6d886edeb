/// The cluster-wide budget of upstream (GitHub) calls: one token bucket shared by every node, so N
/// nodes together never call GitHub more than one process would, and a limit GitHub reports to
/// one node stops all of them.
///
/// Threading: `Sendable`; call from any task (the Redis one hops to its connection's loop).
public protocol UpstreamBudget: Sendable {
    /// Takes `cost` tokens if there are enough and GitHub has not blocked us.
    func take(cost: Int) async -> Result<BudgetDecision, StoreError>

    /// Corrects the bucket with what GitHub said: `remaining` (`X-RateLimit-Remaining`) lowers
    /// the tokens to at most that; `blockedUntil` (seconds since 1970: `X-RateLimit-Reset` when
    /// remaining is 0, or now + `Retry-After`) refuses every call before then, on every node.
    func correct(remaining: Int?, blockedUntil: Double?) async -> Result<Void, StoreError>

    /// Gives back `cost` tokens taken for a call that GitHub did not count against its limit (a `304`
    /// to a conditional request), in one step and never above the bucket's capacity.
    func refund(cost: Int) async -> Result<Void, StoreError>
}

/// The answer of `UpstreamBudget.take`.
public struct BudgetDecision: Sendable, Equatable {
    /// True when the call may go ahead (its tokens are taken).
    public var allowed: Bool
    /// Whole tokens left after this decision.
    public var remaining: Int
    /// When not allowed: seconds until a call could be allowed.
    public var retryAfter: Double

    /// A decision with these values.
    public init(allowed: Bool, remaining: Int, retryAfter: Double) {
        self.allowed = allowed
        self.remaining = remaining
        self.retryAfter = retryAfter
    }
}

/// The shape of a token bucket: `capacity` tokens, refilled at `refillPerSecond`.
public struct TokenBucketShape: Sendable, Equatable {
    /// Most tokens held (the burst).
    public var capacity: Double
    /// Tokens added per second (GitHub search with a token: 30 a minute = 0.5).
    public var refillPerSecond: Double

    /// A bucket of `capacity` refilled at `refillPerSecond`.
    public init(capacity: Double, refillPerSecond: Double) {
        self.capacity = capacity
        self.refillPerSecond = refillPerSecond
    }

    /// Seconds for an empty bucket to fill.
    public var secondsToFull: Double { capacity / refillPerSecond }
}

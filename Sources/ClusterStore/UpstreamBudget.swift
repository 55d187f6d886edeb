/// The cluster-wide budget of upstream (GitHub) calls: one token bucket shared by every node, so N
/// nodes together never call GitHub more than one process would, and a limit GitHub reports to
/// one node stops all of them.
///
/// Threading: `Sendable`; call from any task (the Redis one hops to its connection's loop).
public protocol UpstreamBudget: Sendable {
    /// Takes `cost` tokens if there are enough and GitHub has not blocked us. With `client`, the ask is
    /// recorded first (refused or not: the client is asking), an allowed call counts one against the
    /// client's window, and the client's cap binds only while the budget is contended: a client at its
    /// cap is refused (`BudgetDecision.Refusal.clientShare`), before any token is taken, only if another
    /// client asked within the last window (`BudgetClient.windowSeconds`; on any node). Alone, a client
    /// may take the whole bucket.
    func take(cost: Int, client: BudgetClient?) async -> Result<BudgetDecision, StoreError>

    /// Corrects the bucket with what GitHub said: `remaining` (`X-RateLimit-Remaining`) lowers
    /// the tokens to at most that; `blockedUntil` (seconds since 1970: `X-RateLimit-Reset` when
    /// remaining is 0, or now + `Retry-After`) refuses every call before then, on every node.
    func correct(remaining: Int?, blockedUntil: Double?) async -> Result<Void, StoreError>

    /// Gives back `cost` tokens taken for a call that GitHub did not count against its limit (a `304`
    /// to a conditional request), in one step and never above the bucket's capacity.
    func refund(cost: Int) async -> Result<Void, StoreError>
}

extension UpstreamBudget {
    /// Takes `cost` tokens, charged to no client (no per-client cap).
    public func take(cost: Int) async -> Result<BudgetDecision, StoreError> { await take(cost: cost, client: nil) }
}

/// One client's part of a `take`: who it is and how many calls it may start per window, cluster-wide,
/// while other clients ask. Each client's calls are counted in a fixed window that starts with its first
/// allowed call and lasts `windowSeconds`; the count is forgotten when the window ends (bounded state for
/// rotating addresses). The cap binds while another client has asked within the last `windowSeconds`.
public struct BudgetClient: Sendable, Equatable {
    /// The client (`UpstreamClient`: its address).
    public var key: String
    /// Calls the client may start in one window while others ask (at least 1).
    public var cap: Int
    /// The window's length (the bucket's `secondsToFull`: one window's worth of tokens), and how long
    /// another client's ask keeps the cap binding.
    public var windowSeconds: Double

    /// `key`'s share: at most `cap` calls per `windowSeconds`.
    public init(key: String, cap: Int, windowSeconds: Double) {
        self.key = key
        self.cap = max(1, cap)
        self.windowSeconds = max(0.001, windowSeconds)
    }

    /// `key`'s share of `shape`: `max(1, floor(capacity × share))` calls per `secondsToFull`.
    public init(key: String, share: Double, of shape: TokenBucketShape) {
        self.init(
            key: key, cap: Int((shape.capacity * share).rounded(.down)), windowSeconds: shape.secondsToFull)
    }
}

/// The answer of `UpstreamBudget.take`.
public struct BudgetDecision: Sendable, Equatable {
    /// Why a call was refused.
    public enum Refusal: Sendable, Equatable {
        /// The bucket is empty or GitHub blocked us: no call for anyone before `retryAfter`.
        case budget
        /// The client has started its cap of calls this window while others ask: they may still call.
        case clientShare
    }

    /// True when the call may go ahead (its tokens are taken).
    public var allowed: Bool
    /// Whole tokens left after this decision.
    public var remaining: Int
    /// When not allowed: seconds until a call could be allowed (for `.clientShare`: until the client's
    /// window ends or the others' last ask is a window old, whichever comes first).
    public var retryAfter: Double
    /// When not allowed: which refusal it was (nil when allowed).
    public var refusal: Refusal?

    /// A decision with these values (a refusal is `.budget` unless said otherwise).
    public init(allowed: Bool, remaining: Int, retryAfter: Double, refusal: Refusal? = nil) {
        self.allowed = allowed
        self.remaining = remaining
        self.retryAfter = retryAfter
        self.refusal = allowed ? nil : (refusal ?? .budget)
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

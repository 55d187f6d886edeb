/// The refill of a token bucket: the one formula behind every bucket in the project (a session's input
/// rate, the in-memory upstream budget; the Redis budget's Lua script does the same in its prologue,
/// `BudgetScripts.refill`).
///
/// A value; whoever holds it says which thread touches it.
public struct TokenBucketLevel: Sendable, Equatable {
    /// Tokens in the bucket at `at`.
    public var tokens: Double
    /// When `tokens` was last brought up to date (any unit of time, the same as the rate's).
    public var at: Double

    /// A bucket holding `tokens` at time `at`.
    public init(tokens: Double, at: Double) {
        self.tokens = tokens
        self.at = at
    }

    /// Brings the level up to `now`: `ratePerUnit` tokens per unit of time since `at`, at most
    /// `capacity`. A clock that went backwards adds nothing and leaves `at` where it was.
    @inlinable
    public mutating func refill(to now: Double, capacity: Double, ratePerUnit: Double) {
        if now > at { tokens = min(capacity, tokens + (now - at) * ratePerUnit) }
        at = max(at, now)
    }
}

import Primitives

/// A token bucket: `rate` tokens per second, at most `burst` saved up. Owned by one session (its loop).
///
/// The rate and burst are the same for every session (`--input-rate`, `--input-burst`): they are passed
/// to `take` instead of being stored in each session's bucket. The refill is the project's one
/// (`TokenBucketLevel`).
struct TokenBucket {
    private var level: TokenBucketLevel

    /// A full bucket (`burst` tokens) at `now`.
    init(burst: Double, now: Double) { level = TokenBucketLevel(tokens: burst, at: now) }

    /// Takes one token; returns nil on success, else the seconds until one is available.
    mutating func take(now: Double, rate: Double, burst: Double) -> Double? {
        level.refill(to: now, capacity: burst, ratePerUnit: rate)
        if level.tokens >= 1 {
            level.tokens -= 1
            return nil
        }
        return (1 - level.tokens) / rate
    }
}

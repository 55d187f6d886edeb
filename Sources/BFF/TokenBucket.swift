/// A token bucket: `rate` tokens per second, at most `burst` saved up. Owned by one session.
///
/// The rate and burst are the same for every session (`--input-rate`, `--input-burst`): they are passed
/// to `take` instead of being stored in each session's bucket.
struct TokenBucket {
    private var tokens: Double
    private var last: Double

    /// A full bucket (`burst` tokens) at `now`.
    init(burst: Double, now: Double) {
        tokens = burst
        last = now
    }

    /// Takes one token; returns nil on success, else the seconds until one is available.
    mutating func take(now: Double, rate: Double, burst: Double) -> Double? {
        tokens = min(burst, tokens + (now - last) * rate)
        last = now
        if tokens >= 1 {
            tokens -= 1
            return nil
        }
        return (1 - tokens) / rate
    }
}

/// A token bucket: `rate` tokens per second, at most `burst` saved up. Owned by one session.
struct TokenBucket {
    let rate: Double
    let burst: Double
    private var tokens: Double
    private var last: Double

    init(rate: Double, burst: Double, now: Double) {
        self.rate = rate
        self.burst = burst
        tokens = burst
        last = now
    }

    /// Takes one token; returns nil on success, else the seconds until one is available.
    mutating func take(now: Double) -> Double? {
        tokens = min(burst, tokens + (now - last) * rate)
        last = now
        if tokens >= 1 {
            tokens -= 1
            return nil
        }
        return (1 - tokens) / rate
    }
}

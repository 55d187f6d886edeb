/// The `UpstreamBudget` of one process: the same token bucket and corrections as the Redis one,
/// in memory, with time (seconds since 1970) from the injected clock.
///
/// Threading: thread-safe (one lock).
public final class InMemoryUpstreamBudget: UpstreamBudget, @unchecked Sendable {
    private struct Bucket {
        var tokens: Double
        var at: Double
        var blockedUntil: Double = 0
    }

    /// The bucket's shape.
    public let shape: TokenBucketShape
    private let now: @Sendable () -> Double
    private let bucket: Locked<Bucket?> = Locked(nil)

    /// A full bucket of `shape`, reading time from `now`.
    public init(shape: TokenBucketShape, now: @escaping @Sendable () -> Double) {
        self.shape = shape
        self.now = now
    }

    private func refilled(_ b: inout Bucket?, _ t: Double) -> Bucket {
        var x = b ?? Bucket(tokens: shape.capacity, at: t)
        if t > x.at { x.tokens = min(shape.capacity, x.tokens + (t - x.at) * shape.refillPerSecond) }
        x.at = max(x.at, t)
        return x
    }

    public func take(cost: Int) async -> Result<BudgetDecision, StoreError> {
        let t = now()
        let decision = bucket.withLock { b -> BudgetDecision in
            var x = refilled(&b, t)
            defer { b = x }
            if x.blockedUntil > t {
                return BudgetDecision(allowed: false, remaining: Int(x.tokens), retryAfter: x.blockedUntil - t)
            }
            let c = Double(cost)
            if x.tokens >= c {
                x.tokens -= c
                return BudgetDecision(allowed: true, remaining: Int(x.tokens), retryAfter: 0)
            }
            return BudgetDecision(
                allowed: false, remaining: Int(x.tokens), retryAfter: (c - x.tokens) / shape.refillPerSecond)
        }
        return .success(decision)
    }

    public func correct(remaining: Int?, blockedUntil: Double?) async -> Result<Void, StoreError> {
        let t = now()
        bucket.withLock { b in
            var x = refilled(&b, t)
            if let remaining { x.tokens = min(x.tokens, Double(max(0, remaining))) }
            if let blockedUntil { x.blockedUntil = max(x.blockedUntil, blockedUntil) }
            b = x
        }
        return .success(())
    }

    public func refund(cost: Int) async -> Result<Void, StoreError> {
        let t = now()
        bucket.withLock { b in
            var x = refilled(&b, t)
            x.tokens = min(shape.capacity, x.tokens + Double(cost))
            b = x
        }
        return .success(())
    }
}

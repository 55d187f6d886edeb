import Primitives

/// The `UpstreamBudget` of one process: the same token bucket, per-client windows, recent askers and
/// corrections as the Redis one, in memory, with time (seconds since 1970) from the injected clock.
///
/// Threading: thread-safe (one lock).
public final class InMemoryUpstreamBudget: UpstreamBudget, Sendable {
    private struct Bucket {
        var level: TokenBucketLevel
        var blockedUntil: Double = 0
        var tokens: Double {
            get { level.tokens }
            set { level.tokens = newValue }
        }
    }

    /// What the lock guards: the bucket (nil: a full one), the clients' windows and who asked last.
    private struct State {
        var bucket: Bucket?
        var clients = ClientWindows()
        var askers = RecentAskers()
    }

    /// The bucket's shape.
    public let shape: TokenBucketShape
    private let now: @Sendable () -> Double
    private let state = Lock(State())

    /// A full bucket of `shape`, reading time from `now`.
    public init(shape: TokenBucketShape, now: @escaping @Sendable () -> Double) {
        self.shape = shape
        self.now = now
    }

    /// Runs `body` under the lock with the bucket refilled up to now (a full one if none yet) and
    /// keeps what `body` leaves in it.
    private func withBucket<R>(_ body: (inout Bucket, inout State, _ now: Double) -> R) -> R {
        let t = now()
        return state.withLock { s in
            var b = s.bucket ?? Bucket(level: TokenBucketLevel(tokens: shape.capacity, at: t))
            b.level.refill(to: t, capacity: shape.capacity, ratePerUnit: shape.refillPerSecond)
            defer { s.bucket = b }
            return body(&b, &s, t)
        }
    }

    public func take(cost: Int, client: BudgetClient?) async -> Result<BudgetDecision, StoreError> {
        .success(
            withBucket { b, s, t in
                if let client { s.askers.record(client.key, at: t) }
                if b.blockedUntil > t {
                    return BudgetDecision(allowed: false, remaining: Int(b.tokens), retryAfter: b.blockedUntil - t)
                }
                if let client, let end = s.clients.endIfAtCap(client, now: t),
                    let shared = s.askers.contended(for: client.key, now: t, horizon: client.windowSeconds)
                {
                    return BudgetDecision(
                        allowed: false, remaining: Int(b.tokens), retryAfter: min(end, shared) - t,
                        refusal: .clientShare)
                }
                let c = Double(cost)
                if b.tokens >= c {
                    b.tokens -= c
                    if let client { s.clients.count(client, now: t) }
                    return BudgetDecision(allowed: true, remaining: Int(b.tokens), retryAfter: 0)
                }
                return BudgetDecision(
                    allowed: false, remaining: Int(b.tokens), retryAfter: (c - b.tokens) / shape.refillPerSecond)
            })
    }

    public func correct(remaining: Int?, blockedUntil: Double?) async -> Result<Void, StoreError> {
        withBucket { b, _, _ in
            if let remaining { b.tokens = min(b.tokens, Double(max(0, remaining))) }
            if let blockedUntil { b.blockedUntil = max(b.blockedUntil, blockedUntil) }
        }
        return .success(())
    }

    public func refund(cost: Int) async -> Result<Void, StoreError> {
        withBucket { b, _, _ in b.tokens = min(shape.capacity, b.tokens + Double(cost)) }
        return .success(())
    }

    /// Clients whose window is still held (ended ones are swept once their number doubles).
    public var trackedClients: Int { state.withLock { $0.clients.windows.count } }
}

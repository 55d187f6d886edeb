import ClusterStore
import RedisClient

/// `UpstreamBudget` in Redis: a Lua token bucket on Redis `TIME` (see `BudgetScripts`), one
/// round trip per decision.
///
/// Threading: `Sendable`; each call hops to the client's loop and back.
public final class RedisUpstreamBudget: UpstreamBudget, Sendable {
    /// The client used (on its loop); the bucket's key has a hash tag of its own (one slot, one shard).
    public let client: RedisClient
    /// The bucket's shape (every node must use the same).
    public let shape: TokenBucketShape
    private let key: String

    /// The bucket `name` (e.g. `github-search`) under `keys`, of `shape`, on `client`.
    public init(client: RedisClient, name: String, shape: TokenBucketShape, keys: ClusterKeys) {
        self.client = client
        self.shape = shape
        key = keys.rateLimit(name)
    }

    private func run(_ script: RedisScript, _ extra: [RedisArg]) async -> Result<RESPValue, RedisError> {
        let args = [RedisArg(shape.capacity), RedisArg(shape.refillPerSecond)] + extra
        let key = RedisArg(key)
        return await client.evalScript(script, keys: [key], args: args)
    }

    public func take(cost: Int) async -> Result<BudgetDecision, StoreError> {
        await run(BudgetScripts.take, [RedisArg(cost)]).store { v in
            guard let a = v.array, a.count == 3, let ok = a[0].int, let left = a[1].int, let wait = a[2].int else {
                return nil
            }
            return BudgetDecision(allowed: ok == 1, remaining: Int(left), retryAfter: Double(wait) / 1000)
        }
    }

    public func correct(remaining: Int?, blockedUntil: Double?) async -> Result<Void, StoreError> {
        let untilMs = blockedUntil.map { Int(($0 * 1000).rounded(.up)) } ?? 0
        return await run(BudgetScripts.correct, [RedisArg(remaining ?? -1), RedisArg(untilMs)]).store { _ in () }
    }

    public func refund(cost: Int) async -> Result<Void, StoreError> {
        await run(BudgetScripts.refund, [RedisArg(cost)]).store { _ in () }
    }
}

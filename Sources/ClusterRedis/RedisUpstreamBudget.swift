import ClusterStore
import RedisClient

/// `UpstreamBudget` in Redis: a Lua token bucket on Redis `TIME` (see `BudgetScripts`), with each
/// client's calls counted in a key beside it (`ClusterKeys.rateLimitClient`) and the latest askers in
/// another (`ClusterKeys.rateLimitAskers`), all in one slot, one round trip per decision.
///
/// Threading: `Sendable`; each call hops to the client's loop and back.
public final class RedisUpstreamBudget: UpstreamBudget, Sendable {
    /// The client used (on its loop); the bucket's key has a hash tag of its own (one slot, one shard).
    public let client: RedisClient
    /// The bucket's shape (every node must use the same).
    public let shape: TokenBucketShape
    private let key: String
    private let askers: String
    private let keys: ClusterKeys
    private let name: String

    /// The bucket `name` (e.g. `github-search`) under `keys`, of `shape`, on `client`.
    public init(client: RedisClient, name: String, shape: TokenBucketShape, keys: ClusterKeys) {
        self.client = client
        self.shape = shape
        self.keys = keys
        self.name = name
        key = keys.rateLimit(name)
        askers = keys.rateLimitAskers(name)
    }

    private func run(
        _ script: RedisScript, _ extra: [RedisArg], counter: String? = nil
    ) async -> Result<RESPValue, RedisError> {
        let args = [RedisArg(shape.capacity), RedisArg(shape.refillPerSecond)] + extra
        let keys = [RedisArg(key)] + (counter.map { [RedisArg($0), RedisArg(askers)] } ?? [])
        return await client.evalScript(script, keys: keys, args: args)
    }

    public func take(cost: Int, client c: BudgetClient?) async -> Result<BudgetDecision, StoreError> {
        let share =
            c.map { [RedisArg($0.cap), RedisArg(Int(($0.windowSeconds * 1000).rounded(.up))), RedisArg($0.key)] }
            ?? []
        let counter = c.map { keys.rateLimitClient(name, $0.key) }
        return await run(BudgetScripts.take, [RedisArg(cost)] + share, counter: counter).store { v in
            guard let a = v.array, a.count == 4, let ok = a[0].int, let left = a[1].int, let wait = a[2].int,
                let overShare = a[3].int
            else { return nil }
            return BudgetDecision(
                allowed: ok == 1, remaining: Int(left), retryAfter: Double(wait) / 1000,
                refusal: overShare == 1 ? .clientShare : .budget)
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

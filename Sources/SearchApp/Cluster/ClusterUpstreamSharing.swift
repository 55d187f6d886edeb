import BFF
import ClusterRedis
import ClusterStore
import EventHTTP
import GitHubLive
import GitHubSearch
import Logging
import Primitives

/// Cluster mode's `UpstreamSharing`: every node's gateway asks the cluster-wide token bucket before a
/// call (`ClusterRateBudget`), every node's cache sits over the shared Redis cache
/// (`ClusterSearchUpstream`), and every node's `status` follows the Redis status board
/// (`ClusterStatus`). Built before the application; its parts are connected to the node's Redis
/// connections (loop 0's) once the application exists. See docs/CLUSTER.md, "One upstream, shared".
final class ClusterUpstreamSharing: UpstreamSharing {
    private let github: GitHubSettings
    private let logger: Logger
    private let budget: ClusterRateBudget
    /// The shared cache under the node's cache (made in `search(over:cache:)`).
    private var shared: ClusterSearchUpstream?

    init(github: GitHubSettings, logger: Logger) {
        self.github = github
        self.logger = logger
        budget = ClusterRateBudget(shape: github.sharedBudget, clientShare: github.clientShare, logger: logger)
    }

    var rateBudget: (any SharedRateBudget)? { budget }

    func search(over gateway: PersonalGateways, cache: CacheMaker) -> (
        any RepositorySearching, @Sendable () async -> Void
    ) {
        let shared = ClusterSearchUpstream(gateway: gateway, ttl: github.cacheTTL, logger: logger)
        self.shared = shared
        let nodeCache = cache(over: shared)
        return (ClusterCacheLabel(cache: nodeCache, shared: shared), { await nodeCache.flush() })
    }

    func connect(_ app: Application, status sink: StatusSink, apply: StatusFanOut) {
        guard let node = app.clusterNode else {  // built together by `Application.live`
            preconditionFailure("cluster sharing without a cluster node")
        }
        let keys = ClusterKeys(prefix: node.settings.keyPrefix)
        let client = node.clients[0]
        budget.connect(
            RedisUpstreamBudget(client: client, name: "github-search", shape: github.sharedBudget, keys: keys),
            metrics: node.metrics)
        if let shared {
            let redisCache = RedisSearchCache(
                client: client, subscriber: node.subscribers[0], limits: .init(maxAge: github.cacheMaxAge),
                keys: keys, upstream: UpstreamIdentity(baseURL: github.baseURL, token: github.token).key)
            client.loop.execute { redisCache.start() }
            shared.connect(redisCache, holder: node.holders[0], metrics: node.metrics)
        }
        // Every node's `status` follows the board; this node's reports reach it through the board.
        let board = ClusterStatus(cluster: node, apply: { apply.apply($0) }, logger: logger)
        sink.connect { board.report($0) }
    }
}

/// Cluster mode's `SharedRateBudget`: the gateway's limiter asks the cluster-wide `UpstreamBudget`
/// (connected once the application, which owns the Redis connections, exists) before each call, charging
/// it to the client (at most `clientShare` of a window's calls per client while another client asks on
/// any node, counted on every node), and
/// corrects it with GitHub's answers. Fails open: while Redis is unreachable (or before `connect`) every
/// call is admitted and only this node's limiter (its own per-client cap included) applies, so a Redis
/// outage never stops search.
final class ClusterRateBudget: SharedRateBudget {
    private let budget = Lock<(any UpstreamBudget, ClusterMetrics?)?>(nil)
    private let shape: TokenBucketShape
    private let clientShare: Double
    private let logger: Logger

    /// A budget of `shape` (every node's must be the same) giving each client at most `clientShare` of a
    /// window (1: no per-client cap; no client is sent).
    init(shape: TokenBucketShape, clientShare: Double, logger: Logger) {
        self.shape = shape
        self.clientShare = min(1, max(0.01, clientShare))  // as `RateLimiter.Configuration` takes it
        self.logger = logger
    }

    func connect(_ b: any UpstreamBudget, metrics: ClusterMetrics? = nil) { budget.withLock { $0 = (b, metrics) } }

    func admit(client: String?) async -> SharedBudgetAnswer {
        guard let (b, metrics) = budget.withLock({ $0 }) else { return .admitted }
        let share = clientShare < 1 ? client.map { BudgetClient(key: $0, share: clientShare, of: shape) } : nil
        switch await b.take(cost: 1, client: share) {
        case .success(let d):
            switch d.refusal {
            case nil:
                return .admitted
            case .clientShare:
                return .overShare(
                    seconds: max(0.001, d.retryAfter), cap: share?.cap ?? 1, limit: Int(shape.capacity))
            case .budget:
                metrics?.budgetRefusals.increment()
                return .blocked(seconds: max(0.001, d.retryAfter))
            }
        case .failure(let e):
            metrics?.redisErrors.increment()
            logger.warning("shared GitHub budget unavailable; admitting the call", metadata: ["error": "\(e)"])
            return .admitted
        }
    }

    func report(remaining: Int?, blockedUntil: Double?) async {
        guard let (b, _) = budget.withLock({ $0 }) else { return }
        if case .failure(let e) = await b.correct(remaining: remaining, blockedUntil: blockedUntil) {
            logger.warning("shared GitHub budget not corrected", metadata: ["error": "\(e)"])
        }
    }

    func refund() async {
        guard let (b, _) = budget.withLock({ $0 }) else { return }
        if case .failure(let e) = await b.refund(cost: 1) {
            logger.warning("shared GitHub budget not refunded", metadata: ["error": "\(e)"])
        }
    }
}

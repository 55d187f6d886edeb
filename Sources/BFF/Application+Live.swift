import ClusterRedis
import ClusterStore
import GitHubLive
import GitHubSearch
import Logging
import Synchronization

/// How the live application reaches GitHub and caches its answers.
public struct GitHubSettings: Sendable {
    /// `GITHUB_API_URL`: `https://api.github.com` by default; `http://` accepted (simulator, tests).
    public var baseURL = "https://api.github.com"
    /// `GITHUB_TOKEN`: sent as a bearer token; never logged or returned.
    public var token: String?
    /// Seconds a cached page is fresh.
    public var cacheTTL: Double = 60
    /// Seconds a stale page may still be served when GitHub fails.
    public var cacheMaxAge: Double = 24 * 3600
    /// Most cached pages, and most bytes of cached pages.
    public var cacheMaxEntries = 2000
    public var cacheMaxBytes = 64 << 20
    /// SQLite file of the cache; nil keeps it in memory only.
    public var cachePath: String? = "var/search-cache.sqlite"
    /// Seconds an upstream request may take without progress.
    public var requestTimeout: Double = 10
    /// Cluster mode: the budget of GitHub searches shared by every node (GitHub's search limit with a
    /// token: 30 a minute), a Redis token bucket corrected by GitHub's rate-limit headers.
    public var sharedBudget = TokenBucketShape(capacity: 30, refillPerSecond: 0.5)

    public init() {}
}

extension Application {
    /// The production composition: GitHub gateway → cache decorator → application, with the
    /// gateway's reachability and rate limit feeding the shared `status` view model.
    public static func live(configuration: AppConfiguration, github: GitHubSettings, logger: Logger) throws
        -> Application
    {
        let sink = StatusSink()
        let budget = configuration.cluster == nil ? nil : ClusterRateBudget(logger: logger)
        let gateway = try GitHubGateway(
            // Cluster mode: every report is posted, a repeat too (the board's last post may be another
            // node's), so "last post wins" holds for what this node sees as well.
            configuration: .init(
                baseURL: github.baseURL, token: github.token, requestTimeout: github.requestTimeout,
                rateLimiter: .init(publishesRepeats: budget != nil)),
            logger: logger, onStatus: { sink.forward($0) }, sharedBudget: budget)
        // Which upstream cached pages belong to (base URL and token, digested: never the token itself).
        let identity = UpstreamIdentity(baseURL: github.baseURL, token: github.token)
        func cache<U: RepositorySearching>(over upstream: U) -> SearchCache<U> {
            SearchCache(
                upstream: upstream,
                configuration: .init(
                    ttl: github.cacheTTL, maxAge: github.cacheMaxAge, maxEntries: github.cacheMaxEntries,
                    maxBytes: github.cacheMaxBytes, path: github.cachePath, upstream: identity),
                logger: logger)
        }
        // Cluster mode: the shared Redis cache sits under this node's cache, in front of the gateway.
        let shared = budget == nil ? nil : ClusterSearchUpstream(gateway: gateway, ttl: github.cacheTTL, logger: logger)
        let search: any RepositorySearching
        let flush: @Sendable () async -> Void
        if let shared {
            let nodeCache = cache(over: shared)
            (search, flush) = (nodeCache, { await nodeCache.flush() })
        } else {
            let nodeCache = cache(over: gateway)
            (search, flush) = (nodeCache, { await nodeCache.flush() })
        }
        let app = Application(configuration: configuration, search: search, logger: logger)
        app.finishAfterShutdown = flush
        if let budget, let cluster = app.cluster {
            budget.connect(
                RedisUpstreamBudget(
                    connection: cluster.group.connections[0], name: "github-search", shape: github.sharedBudget,
                    keys: ClusterKeys(prefix: cluster.settings.keyPrefix)), metrics: cluster.metrics)
            if let shared {
                let connection = cluster.group.connections[0]
                let redisCache = RedisSearchCache(
                    connection: connection, subscriber: cluster.subscribers[0],
                    limits: .init(maxAge: github.cacheMaxAge), keys: ClusterKeys(prefix: cluster.settings.keyPrefix),
                    upstream: identity.key)
                connection.loop.execute { redisCache.start() }
                shared.connect(redisCache, holder: cluster.holders[0], metrics: cluster.metrics)
            }
            // Every node's `status` follows the board; this node's reports reach it through the board.
            let board = ClusterStatus(cluster: cluster, apply: app.statusUpdater, logger: logger)
            sink.connect { board.report($0) }
        } else {
            sink.connect(app.statusUpdater)
        }
        return app
    }
}

/// Forwards status reports to a target connected after construction (the gateway is built before
/// the application that owns the `status` view model). Thread-safe.
final class StatusSink: Sendable {
    private let target = Mutex<(@Sendable (UpstreamStatus) -> Void)?>(nil)
    private let early = Mutex<UpstreamStatus?>(nil)

    func forward(_ status: UpstreamStatus) {
        if let t = target.withLock({ $0 }) { t(status) } else { early.withLock { $0 = status } }
    }

    func connect(_ t: @escaping @Sendable (UpstreamStatus) -> Void) {
        target.withLock { $0 = t }
        if let s = early.withLock({ $0 }) { t(s) }
    }
}

/// Cluster mode's `SharedRateBudget`: the gateway's limiter asks the cluster-wide `UpstreamBudget`
/// (connected once the application, which owns the Redis connections, exists) before each call and
/// corrects it with GitHub's answers. Fails open: while Redis is unreachable (or before `connect`)
/// every call is admitted and only this node's limiter applies, so a Redis outage never stops search.
final class ClusterRateBudget: SharedRateBudget {
    private let budget = Mutex<(any UpstreamBudget, ClusterMetrics?)?>(nil)
    private let logger: Logger

    init(logger: Logger) { self.logger = logger }

    func connect(_ b: any UpstreamBudget, metrics: ClusterMetrics? = nil) { budget.withLock { $0 = (b, metrics) } }

    func admit() async -> Double? {
        guard let (b, metrics) = budget.withLock({ $0 }) else { return nil }
        switch await b.take(cost: 1) {
        case .success(let d):
            if !d.allowed { metrics?.budgetRefusals.increment() }
            return d.allowed ? nil : max(0.001, d.retryAfter)
        case .failure(let e):
            metrics?.redisErrors.increment()
            logger.warning("shared GitHub budget unavailable; admitting the call", metadata: ["error": "\(e)"])
            return nil
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

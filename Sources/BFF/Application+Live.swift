import ClusterRedis
import ClusterStore
import EventHTTP
import Features
import GitHubLive
import GitHubSearch
import Logging

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
    /// The largest share of GitHub's rate window one client's uncached searches may take while other
    /// clients ask (`--upstream-client-share`; `RateLimiter.Configuration.clientShare`).
    public var clientShare = 0.5
    /// Seconds an upstream request may take without progress.
    public var requestTimeout: Double = 10
    /// Cluster mode: the budget of GitHub searches shared by every node (GitHub's search limit with a
    /// token: 30 a minute), a Redis token bucket corrected by GitHub's rate-limit headers.
    public var sharedBudget = TokenBucketShape(capacity: 30, refillPerSecond: 0.5)

    public init() {}
}

extension Application {
    /// The production composition: GitHub gateway → cache decorator → application, with the
    /// gateway's reachability and rate limit feeding the shared `status` view model. How GitHub's budget,
    /// the search cache and the status are shared (`UpstreamSharing`: by nobody, or by the cluster through
    /// Redis) is chosen here once, with the session backend.
    public static func live(configuration: AppConfiguration, github: GitHubSettings, logger: Logger) throws
        -> Application
    {
        let sharing: any UpstreamSharing =
            configuration.cluster.map { _ in ClusterUpstreamSharing(github: github, logger: logger) }
            ?? SingleProcessUpstream()
        let sink = StatusSink()
        // The counter lives in the application's metrics, made after the gateway (no search runs before).
        let metrics = Lock<AppMetrics?>(nil)
        let gateway = try GitHubGateway(
            // Cluster mode: every report is posted, a repeat too (the board's last post may be another
            // node's), so "last post wins" holds for what this node sees as well.
            configuration: .init(
                baseURL: github.baseURL, token: github.token, requestTimeout: github.requestTimeout,
                rateLimiter: .init(publishesRepeats: sharing.rateBudget != nil, clientShare: github.clientShare)),
            logger: logger, onStatus: { sink.forward($0) }, sharedBudget: sharing.rateBudget,
            onClientRefusal: { metrics.withLock { $0 }?.upstreamClientRefusals.increment() })
        let (search, flush) = sharing.search(over: gateway, cache: CacheMaker(github: github, logger: logger))
        let app = Application(
            configuration: configuration, search: search,
            viewModels: .product(search: search, pageSize: configuration.searchPageSize), logger: logger)
        metrics.withLock { $0 = app.metrics }
        app.finishAfterShutdown.withLock { $0 = flush }
        sharing.connect(app, status: sink)
        app.statusReport.withLock { $0 = { sink.forward($0) } }  // the test hook's status: as the gateway's
        return app
    }
}

/// Builds this node's search cache over a given upstream (the gateway, or the cluster's shared cache).
struct CacheMaker {
    let github: GitHubSettings
    let logger: Logger

    /// Which upstream cached pages belong to (base URL and token, digested: never the token itself).
    var identity: UpstreamIdentity { UpstreamIdentity(baseURL: github.baseURL, token: github.token) }

    func callAsFunction<U: RepositorySearching>(over upstream: U) -> SearchCache<U> {
        SearchCache(
            upstream: upstream,
            configuration: .init(
                ttl: github.cacheTTL, maxAge: github.cacheMaxAge, maxEntries: github.cacheMaxEntries,
                maxBytes: github.cacheMaxBytes, path: github.cachePath, upstream: identity),
            logger: logger)
    }
}

/// How this process shares what it knows of GitHub — the rate budget, the search cache, the `status` —
/// with other processes: by nobody (`SingleProcessUpstream`) or through the cluster's Redis
/// (`ClusterUpstreamSharing`). The composition's seam beside `SessionBackend`; chosen with it.
protocol UpstreamSharing {
    /// The budget the gateway's limiter asks before each call (nil: its own limit only).
    var rateBudget: (any SharedRateBudget)? { get }
    /// The search model the application uses over `gateway`, and the work that flushes its cache at
    /// shutdown.
    func search(over gateway: GitHubGateway, cache: CacheMaker) -> (
        any RepositorySearching, @Sendable () async -> Void
    )
    /// Connects what needs the application (its loops, Redis connections, `statusUpdater`); `status`
    /// forwards the gateway's reports.
    func connect(_ app: Application, status: StatusSink)
}

/// One process: the gateway's own limiter, a cache over the gateway, status straight to the application.
struct SingleProcessUpstream: UpstreamSharing {
    var rateBudget: (any SharedRateBudget)? { nil }

    func search(over gateway: GitHubGateway, cache: CacheMaker) -> (
        any RepositorySearching, @Sendable () async -> Void
    ) {
        let nodeCache = cache(over: gateway)
        return (nodeCache, { await nodeCache.flush() })
    }

    func connect(_ app: Application, status: StatusSink) { status.connect(app.statusUpdater) }
}

/// Forwards status reports to a target connected after construction (the gateway is built before
/// the application that owns the `status` view model). Thread-safe.
final class StatusSink: Sendable {
    private let target = Lock<(@Sendable (UpstreamStatus) -> Void)?>(nil)
    private let early = Lock<UpstreamStatus?>(nil)

    func forward(_ status: UpstreamStatus) {
        if let t = target.withLock({ $0 }) { t(status) } else { early.withLock { $0 = status } }
    }

    func connect(_ t: @escaping @Sendable (UpstreamStatus) -> Void) {
        target.withLock { $0 = t }
        if let s = early.withLock({ $0 }) { t(s) }
    }
}

/// SearchApp: the product — the GitHub repository search BFF, composed from the host (`BFF`), the
/// product's view models (`Features`: search, greeting, status) and GitHub (`GitHubLive`), with what
/// the cluster's nodes share of GitHub (rate budget, search cache, status) through Redis.
///
/// `Application.live` is the production composition `bff serve` runs; `Application.searchApp` the same
/// product over an injected search model (tests, the load tool's in-process server).
import BFF
import ClusterRedis
import ClusterStore
import EventHTTP
import Features
import GitHubLive
import GitHubSearch
import Logging
import Primitives
import SignIn
import ViewModels

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
    /// "Sign in with GitHub" (`GITHUB_CLIENT_ID` and `GITHUB_CLIENT_SECRET` set); nil: off, every session
    /// anonymous. One process only for now.
    public var signIn: SignInOptions?

    public init() {}
}

extension Application {
    /// The product over an injected search model: the product's view models, the stateless search
    /// route, and with `testHooks` the status test hook; GitHub's status reaches the view models only
    /// through the test hook (tests, the load tool's in-process server).
    public static func searchApp(
        configuration: AppConfiguration, search: any RepositorySearching, logger: Logger,
        clock: SessionClock = .monotonic
    ) -> Application {
        let (app, sink, fanOut, _) = compose(configuration: configuration, search: search, logger: logger, clock: clock)
        sink.connect { fanOut.apply($0) }
        return app
    }

    /// The same with sign-in on (`signIn`), GitHub's OAuth endpoints under `signIn.webURL` and `apiURL`;
    /// searches of signed-in sessions go to `search` like any other (the per-person budget is the live
    /// composition's). Throws when the sealing key is refused.
    public static func searchApp(
        configuration: AppConfiguration, search: any RepositorySearching, logger: Logger, signIn: SignInOptions,
        apiURL: String, clock: SessionClock = .monotonic
    ) throws(SignInSetupError) -> Application {
        let store = try SignInService.makeStore(options: signIn, logger: logger)
        let (app, sink, fanOut, _) = compose(
            configuration: configuration, search: search, logger: logger, clock: clock,
            signIn: (signIn, store, apiURL))
        sink.connect { fanOut.apply($0) }
        return app
    }

    /// The production composition: GitHub gateway → cache decorator → application, with the
    /// gateway's reachability and rate limit feeding the shared `status` view model. How GitHub's budget,
    /// the search cache and the status are shared (`UpstreamSharing`: by nobody, or by the cluster through
    /// Redis) is chosen here once, with the session backend.
    public static func live(configuration: AppConfiguration, github: GitHubSettings, logger: Logger) throws
        -> Application
    {
        // One process keeps its logins in a file; a cluster in Redis, shared by every node (connected
        // once the node exists, below).
        var redisLogins: RedisLogins?
        let redisSignIns = configuration.cluster != nil && github.signIn != nil ? RedisSignIns() : nil
        let store: (any Logins)? = try github.signIn.map { options throws(SignInSetupError) -> any Logins in
            guard configuration.cluster != nil else {
                return try SignInService.makeStore(options: options, logger: logger)
            }
            guard let key = options.secretKey else {
                throw SignInSetupError(
                    description: "cluster mode with sign-in needs BFF_SECRET_KEY (32 bytes, base64, the same on "
                        + "every node: e.g. `openssl rand -base64 32`)")
            }
            let sealer: TokenSealer
            do {
                sealer = try TokenSealer(base64Key: key)
            } catch {
                throw SignInSetupError(description: String(describing: error))
            }
            let logins = RedisLogins(sealer: sealer, ttl: options.loginTTL, logger: logger)
            redisLogins = logins
            return logins
        }
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
        // Signed-in people's uncached searches go out with their own token and budget (under the cache).
        let service = Lock<SignInService?>(nil)
        let personal = PersonalGateways(
            app: gateway, capacity: github.signIn?.maxPersonalClients ?? 1, logger: logger,
            tokens: { await store?.token(forLoginKey: $0) },
            onStatus: { key, status in
                service.withLock { $0 }?.app.withLock { $0 }?.post(PersonalUpstreamStatus(status), toLogin: key)
            },
            onRejected: { key in
                guard let s = service.withLock({ $0 }) else { return }
                Task { await s.end(key, reason: "token-rejected") }
            })
        let (search, flush) = sharing.search(over: personal, cache: CacheMaker(github: github, logger: logger))
        var signIn: (SignInOptions, any Logins, String)?
        if let options = github.signIn, let store { signIn = (options, store, github.baseURL) }
        let (app, _, fanOut, made) = compose(
            configuration: configuration, search: search, logger: logger, sink: sink, signIn: signIn,
            pending: redisSignIns)
        made?.personal.withLock { $0 = personal }
        if let node = app.clusterNode {
            redisLogins?.connect(node)
            redisSignIns?.connect(node)
        }
        service.withLock { $0 = made }
        metrics.withLock { $0 = app.metrics }
        app.finishAfterShutdown.withLock { $0 = flush }
        sharing.connect(app, status: sink, apply: fanOut)
        return app
    }

    /// The application with the product's view models and routes; the test hook's status goes into
    /// `sink`, as the gateway's reports do (in cluster mode to the status board, so to every node).
    private static func compose(
        configuration: AppConfiguration, search: any RepositorySearching, logger: Logger,
        clock: SessionClock = .monotonic, sink: StatusSink = StatusSink(),
        signIn: (options: SignInOptions, store: any Logins, apiURL: String)? = nil,
        pending: (any SignInsUnderWay)? = nil
    ) -> (Application, StatusSink, StatusFanOut, SignInService?) {
        var made: SignInService?
        let app = Application(
            configuration: configuration,
            viewModels: .product(
                search: search, pageSize: configuration.searchPageSize, signInEnabled: signIn != nil),
            logger: logger, clock: clock,
            signIn: signIn.map { SignInSettings(logins: $0.store, publicURL: $0.options.publicURL) })
        if let signIn {
            let service = SignInService(
                options: signIn.options, apiURL: signIn.apiURL, store: signIn.store, pending: pending, logger: logger,
                factory: app.metrics.factory)
            service.app.withLock { $0 = app }
            service.register(on: app)
            made = service
        } else {
            SignInService.registerDisabled(on: app)
        }
        app.serveStatelessSearch(search)
        if configuration.testHooks { app.serveStatusTestHook(into: sink) }
        return (app, sink, StatusFanOut(app: app), made)
    }
}

/// Applies GitHub's status reports to the application: every report to the app-wide view models (the
/// `status` view model), and to every session's view models only when the app-wide search block
/// changes (a rate limit disables searching in every session, including those that have not searched
/// yet; most reports only move the remaining budget). Any thread.
final class StatusFanOut: Sendable {
    private weak let app: Application?
    /// The `blockedUntil` last sent to the sessions (`.none`: nothing yet).
    private let lastBlockFannedOut = Lock<Int??>(.none)

    init(app: Application) { self.app = app }

    func apply(_ status: UpstreamStatus) {
        guard let app else { return }
        let changed = lastBlockFannedOut.withLock { last in
            defer { last = .some(status.blockedUntil) }
            return last != .some(status.blockedUntil)
        }
        app.post(status, toSessions: changed, standing: status.blockedUntil != nil)
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
    func search(over gateway: PersonalGateways, cache: CacheMaker) -> (
        any RepositorySearching, @Sendable () async -> Void
    )
    /// Connects what needs the application (its loops, Redis connections); `status` forwards the
    /// gateway's reports, `apply` applies a status to this application.
    func connect(_ app: Application, status: StatusSink, apply: StatusFanOut)
}

/// One process: the gateway's own limiter, a cache over the gateway, status straight to the application.
struct SingleProcessUpstream: UpstreamSharing {
    var rateBudget: (any SharedRateBudget)? { nil }

    func search(over gateway: PersonalGateways, cache: CacheMaker) -> (
        any RepositorySearching, @Sendable () async -> Void
    ) {
        let nodeCache = cache(over: gateway)
        return (nodeCache, { await nodeCache.flush() })
    }

    func connect(_ app: Application, status: StatusSink, apply: StatusFanOut) { status.connect { apply.apply($0) } }
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

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

    public init() {}
}

extension Application {
    /// The production composition: GitHub gateway → cache decorator → application, with the
    /// gateway's reachability and rate limit feeding the shared `status` view model.
    public static func live(configuration: AppConfiguration, github: GitHubSettings, logger: Logger) throws
        -> Application
    {
        let sink = StatusSink()
        let gateway = try GitHubGateway(
            configuration: .init(baseURL: github.baseURL, token: github.token, requestTimeout: github.requestTimeout),
            logger: logger, onStatus: { sink.forward($0) })
        let cache = SearchCache(
            upstream: gateway,
            configuration: .init(
                ttl: github.cacheTTL, maxAge: github.cacheMaxAge, maxEntries: github.cacheMaxEntries,
                maxBytes: github.cacheMaxBytes, path: github.cachePath),
            logger: logger)
        let app = Application(configuration: configuration, search: cache, logger: logger)
        sink.connect(app.statusUpdater)
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

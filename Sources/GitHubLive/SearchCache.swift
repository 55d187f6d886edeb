import Foundation
import GitHubSearch
import Logging

/// A caching decorator over any `RepositorySearching` (normally the `GitHubGateway`).
///
/// Per request (query, sort, order, page, page size):
/// - younger than `ttl`: served from memory, `.hit`, no upstream call;
/// - between `ttl` and `maxAge`: served at once as `.stale` while one background call revalidates
///   it. `isStale` is false unless the last revalidation of this entry **failed** (then true: the
///   data is past freshness because upstream could not give better);
/// - between `ttl` and `maxAge` while the upstream (an `UpstreamBudgetReporting`) is rate-limited:
///   served at once as `.stale` with `isStale: true` (the last good page, marked), and no
///   revalidation is attempted (it would be refused);
/// - older than `maxAge` or absent: fetched (`.miss`), errors are thrown;
/// - `.revalidate` policy: fetched now (`.revalidated`); if that fails and an entry younger than
///   `maxAge` exists it is served as `.stale` with `isStale: true` (never for `invalidQuery`).
///
/// Concurrent identical requests share one upstream call (single flight; a cancelled caller leaves it,
/// see `SearchCache+SingleFlight.swift`). When the upstream is a
/// `ConditionalRepositorySearching`, revalidation sends the entry's `ETag` and a 304 refreshes it.
/// Bounded LRU by `maxEntries` and `maxBytes` (an entry weighs its encoded page's bytes).
/// Persistence (when `path` is set): loaded at start, written through on a private serial queue,
/// so the actor never waits on disk; LRU order is persisted as of each write, not each hit. The file
/// records `configuration.upstream`: one written for another upstream starts empty (`CacheStore`).
///
/// An actor: all cache state lives on its executor (the cooperative pool, never an event loop).
public actor SearchCache<Upstream: RepositorySearching>: RepositorySearching {
    /// TTL, maximum age, bounds and the file.
    public struct Configuration: Sendable {
        /// Seconds an entry is fresh (`.hit`).
        public var ttl: Double
        /// Seconds after which an entry is never served.
        public var maxAge: Double
        /// At most this many entries.
        public var maxEntries: Int
        /// At most this many bytes of encoded pages.
        public var maxBytes: Int
        /// The SQLite file; nil keeps the cache in memory only.
        public var path: String?
        /// The upstream the pages come from: a file written for another one is not read (nil: unnamed).
        public var upstream: UpstreamIdentity?

        /// Defaults: 60 s fresh, 24 h max age, 2000 entries, 64 MiB, memory only.
        public init(
            ttl: Double = 60, maxAge: Double = 86_400, maxEntries: Int = 2000, maxBytes: Int = 64 << 20,
            path: String? = nil, upstream: UpstreamIdentity? = nil
        ) {
            self.ttl = ttl
            self.maxAge = maxAge
            self.maxEntries = max(1, maxEntries)
            self.maxBytes = max(1, maxBytes)
            self.path = path
            self.upstream = upstream
        }
    }

    struct Entry {
        var request: SearchRequest
        var page: SearchPage
        var etag: String?
        var storedAt: Double
        var pageJSON: [UInt8]
        var lastUse: Int
        var revalidationFailed = false
    }

    /// The wrapped search.
    public nonisolated let upstream: Upstream
    /// The configuration in use.
    public nonisolated let configuration: Configuration
    let clock: any WallClock
    let logger: Logger
    let store: CacheStore?
    var entries: [String: Entry] = [:]
    /// The single-flight upstream call under way per key.
    var inFlight: [String: Flight] = [:]
    /// Numbers for flights and their waiters.
    var flightCounter = 0
    /// Tests waiting for a flight to have a number of waiters (`waitForWaiters`).
    var flightWatchers = CountWatchers<String>()
    var useCounter = 0
    /// Calls of `search` so far (tests use it to know every caller has arrived).
    @_spi(Testing) public private(set) var lookups = 0
    /// Bytes of all entries' encoded pages.
    public internal(set) var totalBytes = 0

    /// Creates the cache and loads the file at `configuration.path`, if any (synchronously: call at start-up).
    public init(
        upstream: Upstream, configuration: Configuration = Configuration(), clock: any WallClock = SystemWallClock(),
        logger: Logger = Logger(label: "bff.search-cache")
    ) {
        self.upstream = upstream
        self.configuration = configuration
        self.clock = clock
        self.logger = logger
        let store = configuration.path.map { CacheStore(path: $0, upstream: configuration.upstream, logger: logger) }
        self.store = store
        var loaded: [String: Entry] = [:]
        var bytes = 0
        var counter = 0
        // Most recent first, keeping what fits the (possibly smaller) bounds and the maximum age.
        let now = clock.now()
        for stored in (store?.loadAll() ?? []).reversed() {
            let fits =
                loaded.count < configuration.maxEntries && bytes + stored.pageJSON.count <= configuration.maxBytes
            guard fits, now - stored.storedAt < configuration.maxAge, loaded[stored.key] == nil else {
                store?.delete(key: stored.key)
                continue
            }
            counter = max(counter, stored.lastUse)
            loaded[stored.key] = Entry(
                request: stored.request, page: stored.page, etag: stored.etag, storedAt: stored.storedAt,
                pageJSON: stored.pageJSON, lastUse: stored.lastUse)
            bytes += stored.pageJSON.count
        }
        entries = loaded
        totalBytes = bytes
        useCounter = counter
        if !loaded.isEmpty { logger.info("search cache loaded", metadata: ["entries": "\(loaded.count)"]) }
    }

    /// Number of entries.
    public var count: Int { entries.count }

    /// Answers from cache or upstream as described on the type.
    public func search(_ request: SearchRequest, policy: CachePolicy) async throws(SearchError) -> SearchResponse {
        lookups += 1
        let key = SearchCache.key(request)
        let now = clock.now()
        if let entry = entries[key], now - entry.storedAt >= configuration.maxAge {
            remove(key)  // too old to serve under any policy
        }
        switch policy {
        case .useCache:
            if var entry = entries[key] {
                useCounter += 1
                entry.lastUse = useCounter
                entries[key] = entry
                if now - entry.storedAt < configuration.ttl {
                    return SearchResponse(page: entry.page, cache: .hit)
                }
                if let budget = upstream as? any UpstreamBudgetReporting, await budget.limitedNow() != nil {
                    return SearchResponse(page: entry.page, cache: .stale, isStale: true)  // no doomed call
                }
                startFetch(request, key: key, background: true)  // stale-while-revalidate
                return SearchResponse(page: entry.page, cache: .stale, isStale: entry.revalidationFailed)
            }
            let page = try await join(request, key: key).get()
            return SearchResponse(page: page, cache: .miss)
        case .revalidate:
            let existed = entries[key] != nil
            switch await join(request, key: key) {
            case .success(let page):
                return SearchResponse(page: page, cache: existed ? .revalidated : .miss)
            case .failure(let error):
                if case .invalidQuery = error { throw error }
                guard let entry = entries[key], clock.now() - entry.storedAt < configuration.maxAge else { throw error }
                return SearchResponse(page: entry.page, cache: .stale, isStale: true)
            }
        }
    }

    /// Waits until every upstream call under way (including background revalidations) has finished
    /// (tests).
    @_spi(Testing) public func waitForRevalidations() async {
        while let task = inFlight.values.first?.task { await task.value }
    }

    /// Waits until every write so far has reached the SQLite file.
    public func flush() async { await store?.flush() }

    func finish(
        _ request: SearchRequest, key: String, _ fetched: Result<ConditionalFetch, SearchError>,
        cached: (page: SearchPage, etag: String?)?
    ) -> Result<SearchPage, SearchError> {
        let now = clock.now()
        switch fetched {
        case .success(.modified(let page, let etag)):
            insert(request, key: key, page: page, etag: etag, now: now)
            return .success(page)
        case .success(.notModified):
            guard var entry = entries[key] else {
                guard let cached else {
                    return .failure(.upstream(message: "GitHub answered 304 for an uncached search."))
                }
                insert(request, key: key, page: cached.page, etag: cached.etag, now: now)  // evicted meanwhile
                return .success(cached.page)
            }
            entry.storedAt = now
            entry.revalidationFailed = false
            entries[key] = entry
            persist(key, entry)
            return .success(entry.page)
        case .failure(let error):
            entries[key]?.revalidationFailed = true
            return .failure(error)
        }
    }
}
